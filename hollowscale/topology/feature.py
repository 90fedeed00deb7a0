"""Placement quality as a feature of a run (:mod:`hollowscale.run.features`), for scenarios whose pools have
topology levels (:meth:`hollow.pools.Topology.level_labels` non-empty).

* prepare: it keeps the endpoint (it creates nothing);
* the pod timeline: it reads the run's (:class:`hollowscale.measure.timeline.Timeline`) rather than watching
  the pods a second time;
* summarize (before the teardown: nodes, pods and Workloads still exist): one LIST each of the Nodes, of the
  run's gang pods and of Kueue's Workloads (when the cluster runs Kueue), then ``measurements.topology``
  (:mod:`hollowscale.topology.figures`, :mod:`hollowscale.topology.fragmentation`), Kueue's admission
  cycle from the run's Prometheus (:mod:`hollowscale.topology.promfigures`), the series the report plots
  (``summary["topology_series"]``), and ``related``: where the figures read beside these already are
  (jobs per hour, GPU allocation, the scheduler's cycle, the batch steps, the binding limit);
* teardown: nothing to remove.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.measure.prom import PromQueries
from hollowscale.measure.timeline import Timeline
from hollowscale.scenario import Scenario
from hollowscale.topology import report
from hollowscale.topology.figures import SOURCES, topology_measurements
from hollowscale.topology.levels import applies as levels_apply
from hollowscale.topology.promfigures import admission_attempts
from hollowscale.topology.timeline import NODES_PATH, PODS_PATH, WORKLOADS_PATH
from kubecore.config import KubeEndpoint
from kubecore.namespaces import NamespaceClaim
from kubecore.watch import list_all, session_for
from loadgen.workloads import LABEL_GANG


def applies(sc: Scenario) -> bool:
    """The run's pools have topology levels."""
    return levels_apply(sc.pools)


def slices_of_workloads(sc: Scenario) -> dict[str, tuple[str, int]]:
    """Workload name -> its Kueue slices' (level, size), for the workloads whose ``topology`` names them (checked
    in every variant: the default scheduler may keep a slice whole by chance, or not)."""
    return {w.name: (w.topology.slice_level, int(w.topology.slice_size)) for w in sc.workloads
            if w.topology is not None and w.topology.slice_level is not None and w.topology.slice_size is not None}


def level_of_workloads(sc: Scenario) -> dict[str, str]:
    """Workload name -> the level its ``topology`` names (workloads without one are left out)."""
    return {w.name: w.topology.level for w in sc.workloads if w.topology is not None}


def block(m: dict[str, Any], variant_topology: str | None) -> dict[str, Any]:
    """``measurements.topology`` completed: the variant's topology mode, where the related figures are, and
    the leaves a comparison reads (``m`` from :func:`hollowscale.topology.figures.topology_measurements`)."""
    m["variant_topology"] = variant_topology
    m["related"] = dict(report.RELATED)
    m["gpu_hours_lost_to_spread"] = m["spread"]["gpu_hours_lost"]
    m["spread_mismatches"] = m["spread"]["mismatches"]["members"]
    m["unusable_gpus_avg"] = m["fragmentation"]["unusable_gpus"]["avg"]
    return m


class TopologyFeature(report.TopologySection):
    """The run's placement figures and their section of the report."""

    def __init__(self, sc: Scenario, log: Callable[[str], None], errors: list[str]) -> None:
        self.sc = sc
        self.log = log
        self.errors = errors
        self.endpoint: KubeEndpoint | None = None
        self.timeline: Timeline | None = None

    def prepare(self, endpoint: KubeEndpoint, real_nodes: RealNodeAccess, claims: list[NamespaceClaim]) -> None:
        self.endpoint = endpoint

    def use_timeline(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def _objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(Nodes, the run's gang pods, Kueue's Workloads of the run's namespaces), listed now."""
        assert self.endpoint is not None
        session = session_for(self.endpoint, 1)
        server = self.endpoint.server
        nodes = list_all(session, server, NODES_PATH)
        pods: list[dict[str, Any]] = []
        workloads: list[dict[str, Any]] = []
        for ns in self.sc.namespaces:
            pods += list_all(session, server, PODS_PATH.format(ns=ns), label_selector=LABEL_GANG)
            if self.sc.cluster.kueue:
                workloads += list_all(session, server, WORKLOADS_PATH.format(ns=ns))
        return nodes, pods, workloads

    def summarize(self, summary: dict[str, Any], t0: float) -> None:
        if self.endpoint is None or self.timeline is None:
            return
        end = time.time()
        try:
            nodes, pods, workloads = self._objects()
        except Exception as exc:  # the rest of the report stands without it
            self.errors.append(f"topology: listing nodes, pods or Workloads failed: {exc.__class__.__name__}: {exc}")
            return
        records = self.timeline.snapshot()[0]
        window = ((summary.get("measurements") or {}).get("batch") or {}).get("crosscheck_counts", {}).get("window_ms")
        m, series = topology_measurements(records, pods, nodes, workloads, self.sc.pools, level_of_workloads(self.sc),
                                          t0 * 1000.0, end * 1000.0, self.sc.measurements.sample_interval_s,
                                          (float(window[0]), float(window[1])) if window else None,
                                          slices_of_workloads(self.sc))
        variant = next((v for v in self.sc.variants if v.name == self.sc.variant), None)
        block(m, getattr(variant, "topology", None))
        measurements = summary.setdefault("measurements", {})
        measurements["topology"] = m
        summary["topology_series"] = series
        sources = summary.setdefault("sources", {})
        sources["topology"] = dict(SOURCES)
        prom = summary.get("prometheus") or {}
        if prom.get("url") and self.sc.cluster.kueue:
            try:
                start, stop = prom.get("window") or [t0, end]
                m["kueue_admission_attempt_ms"] = admission_attempts(PromQueries(prom["url"]), float(start), float(stop))
                sources["topology"]["kueue_admission_attempt_ms"] = m["kueue_admission_attempt_ms"]["queries"]
            except Exception as exc:  # the rest of the report stands without it
                self.errors.append(f"topology PromQL failed: {exc.__class__.__name__}: {exc}")

    def teardown(self) -> list[str]:
        """It made nothing."""
        return []
