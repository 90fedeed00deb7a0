"""Training jobs through failures as a feature of a run (:mod:`hollowscale.run.features`), for scenarios whose
workloads checkpoint (``checkpoint_interval``) or whose faults are aimed at jobs (node faults, aimed pod
failures, fault processes: :mod:`hollowscale.run.jobfaults`).

* the pod timeline: it reads the run's (:class:`hollowscale.measure.timeline.Timeline`);
* summarize: every firing of the run's faults (``summary["faults"][*]["firings"]``) against the jobs' pods,
  through :func:`hollowscale.training.recovery.training_recovery`: ``measurements.training`` (per fault:
  time until the controller reacts, until the job runs whole again, the work lost since its checkpoint and
  the GPU-seconds wasted; per job: attempts, restarts, effective training time ratio), and beside them the
  figures other parts computed that say what bound the recovery (``related``);
* teardown: nothing to remove (the faults' nodes are the agents', the jobs the run's namespaces').
"""

from __future__ import annotations

import time
from typing import Any

from hollowscale.measure.timeline import JobRecord, Timeline
from hollowscale.scenario import Scenario
from hollowscale.training import report
from hollowscale.training.recovery import training_recovery

#: where the figures come from (``summary["sources"]["training"]``)
SOURCES = {
    "pods": "the run's pod watch (hollowscale/measure/timeline.py): each pod's created, scheduled, running, "
            "finished and deleted times as the collector received them, its node, GPUs and gang-min",
    "faults": "summary.faults[*].firings: each firing's time and the nodes and pods it hit",
    "model": "hollowscale/training/recovery.py (the hollow agent's: hollow/gangs.py)",
}


def applies(sc: Scenario) -> bool:
    """Some workload checkpoints, or some fault is aimed at the jobs."""
    return any(w.checkpoint_interval is not None for w in sc.workloads) or any(f.aimed_at_jobs for f in sc.faults)


def failed_for_good(jobs: list[JobRecord]) -> dict[str, list[str]]:
    """Workload -> the instances whose current Jobs failed (a Job deleted before it completed was superseded by
    a JobSet's restart and does not count; one that failed and stayed is the controller giving up)."""
    out: dict[str, set[str]] = {}
    for j in jobs:
        if j.kind == "Job" and j.outcome == "Failed" and not j.superseded:
            out.setdefault(j.workload, set()).add(j.instance)
    return {w: sorted(v) for w, v in sorted(out.items())}


def firings(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every firing of the run's faults aimed at jobs, in time order."""
    out = [dict(firing, spec=i) for i, e in enumerate(entries) for firing in e.get("firings") or ()]
    return sorted(out, key=lambda f: f["t_ms"])


class TrainingFeature(report.TrainingSection):
    """The run's recovery figures and their section of the report."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.timeline: Timeline | None = None

    def use_timeline(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def summarize(self, summary: dict[str, Any], t0: float) -> None:
        if self.timeline is None:
            return
        pods, jobs = self.timeline.snapshot()
        checkpoints = {w.name: w.checkpoint_interval for w in self.sc.workloads}
        m = training_recovery(pods, firings(summary.get("faults") or []), checkpoints, time.time() * 1000.0)
        for row in m["faults"]:
            row["at_s"] = round(row["t_ms"] / 1000.0 - t0, 3)
        m["checkpoint_s"] = {k: v for k, v in checkpoints.items() if v is not None}
        m["failed_for_good"] = failed_for_good(jobs)
        m["summary"]["jobs_failed_for_good"] = sum(len(v) for v in m["failed_for_good"].values())
        m["related"] = dict(report.RELATED)
        summary.setdefault("measurements", {})["training"] = m
        summary.setdefault("sources", {})["training"] = dict(SOURCES)

    def teardown(self) -> list[str]:
        """It made nothing."""
        return []
