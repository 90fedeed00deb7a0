"""The distillation jobs as a feature of a run: what this room does in each phase the Runner goes through.

- before the agents (its own phase, ``distill-setup``): image, checkpoint, namespace, teachers created
  and Ready, the monitor started (:mod:`.prepare`, :mod:`.jobs`);
- when the load starts: each job's student is created ``start_at_s`` later;
- its faults: ``teacher-kill`` (the run's teacher pod deleted with no grace) and ``teacher-scale``;
- settle: the run waits for the students too;
- summary: each job's section and ``measurements.distill`` (:mod:`.figures`); the report's section
  (:mod:`.report`);
- teardown: every object the jobs created, by uid.

The Runner composes it through the hooks of :mod:`hollowscale.run.features`, only for a scenario with
``distill_jobs``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.distilljobs.jobs import DistillJobs
from hollowscale.distilljobs.prepare import add_distill_section, build_distill_jobs
from hollowscale.distilljobs.report import DistillJobsSection
from hollowscale.scenario import FaultSpec, Scenario
from hollowscale.scenario.distill import DISTILL_FAULTS
from hollowscale.timestamps import iso
from kubecore.config import KubeEndpoint
from kubecore.namespaces import NamespaceClaim

Log = Callable[[str], None]
FaultHandler = Callable[[FaultSpec], dict[str, Any]]


class DistillJobsFeature(DistillJobsSection):
    """A run's real distillation jobs, phase by phase (see the module docstring)."""

    def __init__(self, sc: Scenario, run_id: str, log: Log, errors: list[str], sleep: Callable[[float], None],
                 phase: Callable[[str], None]) -> None:
        self.sc = sc
        self.run_id = run_id
        self.log = log
        self.errors = errors
        self.sleep = sleep
        self.phase = phase
        self.jobs: DistillJobs | None = None

    def prepare(self, endpoint: KubeEndpoint, real_nodes: RealNodeAccess, claims: list[NamespaceClaim]) -> None:
        """The distill image on the real nodes, the teacher checkpoint, the jobs' namespace, teachers Ready."""
        self.phase("distill-setup")
        self.jobs = build_distill_jobs(self.sc, real_nodes, endpoint, self.run_id, claims, self.log)
        self.jobs.create_teachers()
        self.jobs.wait_teachers_ready(300.0, self.sleep)
        self.jobs.start_monitor()

    def load_started(self, schedule: Callable[[float, Callable[[], None]], None]) -> None:
        """Each job's student, ``start_at_s`` after the load started."""
        jobs = self.jobs
        if jobs is None:
            return
        for job in self.sc.distill_jobs:
            schedule(job.start_at_s, functools.partial(jobs.create_student, job.name))

    def fault_handlers(self) -> dict[str, FaultHandler]:
        return dict.fromkeys(DISTILL_FAULTS, self.fire)

    def fire(self, f: FaultSpec) -> dict[str, Any]:
        """Kill one of a distillation job's teacher pods, or scale its teachers; the fault's log entry."""
        assert f.job is not None
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "job": f.job, "fired_at": iso(time.time()),
                                 "t": time.time()}
        if self.jobs is None:
            entry["error"] = "no distillation jobs in this run"
        elif f.type == "teacher-kill":
            entry.update(self.jobs.kill_teacher(f.job))
        else:
            assert f.replicas is not None
            entry.update(self.jobs.scale_teachers(f.job, f.replicas))
        if entry.get("error"):
            self.errors.append(f"fault {f.type} {f.job}: {entry['error']}")
        self.log(f"fault {f.type} {f.job} fired: {entry.get('pod') or entry.get('replicas')} "
                 f"{entry.get('error') or ''}")
        return entry

    def settled(self) -> bool:
        """Whether every student has finished (the run settles only then)."""
        return self.jobs is None or self.jobs.students_done()

    def summarize(self, summary: dict[str, Any], t0: float) -> None:
        """Each job's section and ``measurements.distill`` (``t0``: the load's start)."""
        if self.jobs is not None:
            add_distill_section(summary, self.jobs, t0)

    def teardown(self) -> list[str]:
        """Delete what the jobs created; the errors."""
        return self.jobs.delete_all() if self.jobs is not None else []
