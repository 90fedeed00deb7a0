"""GPUs as DRA devices, as a feature of a run (:mod:`hollowscale.run.features`).

* prepare (before the agents): the DeviceClasses its pools need (:func:`hollow.dra.device_classes`,
  labelled with the run); the claims' server-side dry run (``?dryRun=All``: a selector that does not
  compile stops the run here, before anything else starts, every problem at once); the roles'
  ResourceClaimTemplates in every namespace of the load; the claim timeline's watches;
* settle: the run settles only once no claim is left allocated whose pods all ended (the resourceclaim
  controller releases them; at the default profile's client QPS of 20 that takes minutes for thousands
  of claims: the wait is measured and reported);
* summarize: ``measurements.dra`` (:mod:`hollowscale.dra.figures`), ``measurements.dra_scheduler``
  (:mod:`hollowscale.dra.promfigures`), the integrity of the claims (every claim the apiserver shows
  allocated is in the timeline; none left allocated), the scheduler's reasons for pods whose claims no
  device satisfies, and the series the report plots (``summary["dra_series"]``);
* teardown: the watches stop; the DeviceClasses it created are deleted by uid (the claims and templates
  go with the run's namespaces).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from hollow.dra import device_classes, memory_bytes
from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.dra import report
from hollowscale.dra.figures import SOURCES, dra_measurements
from hollowscale.dra.objects import DeviceClasses, DraObjectError, claim_objects, create_templates, dry_run
from hollowscale.dra.promfigures import dra_prom_figures
from hollowscale.dra.timeline import CLAIMS_PATH, ClaimCollector
from hollowscale.measure.prom import PromQueries
from hollowscale.measure.timeline import Timeline
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint
from kubecore.namespaces import RUN_LABEL, NamespaceClaim
from kubecore.watch import list_all, session_for


def applies(sc: Scenario) -> bool:
    """The run has DRA: a pool publishes slices, a role claims devices, or it is a variant of a scenario whose
    variants ask for GPUs in different ways (then every variant gets the figures, counted ones included)."""
    return (any(p.dra is not None for p in sc.pools) or any(r.claim is not None for w in sc.workloads for r in w.roles)
            or bool(sc.variant and any(v.gpus is not None or v.gpu_sharing is not None for v in sc.variants)))


def typical_memory(sc: Scenario) -> int:
    """The smallest memory share the workloads ask (0 when none asks a share)."""
    shares = [memory_bytes(r.claim.memory) for w in sc.workloads for r in w.roles
              if r.claim is not None and r.claim.memory is not None]
    return min(shares, default=0)


class DraFeature:
    """The run's DeviceClasses, claim dry run and templates, claim timeline, figures and report section."""

    def __init__(self, sc: Scenario, run_id: str, log: Callable[[str], None], errors: list[str]) -> None:
        self.sc = sc
        self.run_id = run_id
        self.log = log
        self.errors = errors
        self.endpoint: KubeEndpoint | None = None
        self.classes: DeviceClasses | None = None
        self.collector: ClaimCollector | None = None
        self.pods: Timeline | None = None
        self.release_wait_from: float | None = None
        self.release_wait_s: float | None = None
        self.section = report.DraSection()

    # ------------------------------------------------------------------------------------ prepare
    def prepare(self, endpoint: KubeEndpoint, real_nodes: RealNodeAccess, claims: list[NamespaceClaim]) -> None:
        self.endpoint = endpoint
        session = session_for(endpoint, 1)
        self.classes = DeviceClasses(session, endpoint.server)
        self.classes.create(device_classes([p.gpus for p in self.sc.pools if p.gpus is not None],
                                           labels={RUN_LABEL: self.run_id}))
        for line in self.classes.reused:
            self.log(f"DeviceClass {line}")
        problems = dry_run(session, endpoint.server, claim_objects(self.sc.load, self.run_id))
        if problems:
            raise DraObjectError(f"{self.sc.source}: the claims do not pass the apiserver's dry run (nothing of the "
                                 "load was created):\n" + "\n".join(f"{self.sc.source}: {p}" for p in problems))
        made = create_templates(session, endpoint.server, self.sc.load, self.run_id)
        if made:
            self.log(f"{made} ResourceClaimTemplate(s) created")
        self.collector = ClaimCollector(endpoint, self.sc.namespaces)
        self.collector.start()

    def use_timeline(self, timeline: Timeline) -> None:
        self.pods = timeline

    # ------------------------------------------------------------------------------------ settle
    def _held_without_pods(self) -> int:
        """Claims still allocated although every pod that used them ended (the controller has not released them)."""
        if self.collector is None:
            return 0
        tl = self.collector.timeline
        with tl.lock:
            held = [(c.pod_uid, list(c.reserved_pods)) for c in tl.claims.values() if c.allocated_now]
        if not held:
            return 0
        live: set[str] = set()
        if self.pods is not None:
            with self.pods.lock:
                live = {u for u, p in self.pods.pods.items() if p.finished_ms is None and p.deleted_ms is None}
        return sum(1 for pod, reserved in held if not any(u in live for u in ([pod] if pod else reserved)))

    def settled(self) -> bool:
        """No claim is left allocated once its pods ended (the wait for the resourceclaim controller is timed)."""
        waiting = self._held_without_pods()
        now = time.time()
        if waiting and self.release_wait_from is None:
            self.release_wait_from = now
            self.log(f"waiting for the resourceclaim controller to release {waiting} claim(s) of ended pods")
        if not waiting and self.release_wait_from is not None and self.release_wait_s is None:
            self.release_wait_s = round(now - self.release_wait_from, 3)
        return not waiting

    # ------------------------------------------------------------------------------------ summary
    def summarize(self, summary: dict[str, Any], t0: float) -> None:
        if self.collector is None:
            return
        claims = self.collector.timeline.snapshot()
        pods = self.pods.snapshot()[0] if self.pods is not None else []
        end = time.time()
        step = self.sc.measurements.sample_interval_s
        dm = dra_measurements(claims, pods, self.sc.pools, typical_memory(self.sc), t0 * 1000.0, end * 1000.0, step)
        m = dm["measurements"]
        m["release_wait_s"] = self.release_wait_s
        m["integrity"] = self._integrity(claims)
        # the leaves an SLO may name (SLO_METRICS["dra"])
        m["claims_left_allocated"] = m["integrity"].get("left_allocated_after_pods_ended")
        m["claims_never_allocated"] = m["claims"]["never_allocated"]
        m["gpus_allocated_avg"] = m["gpus_allocated"]["avg"]
        m["gpus_allocated_max"] = m["gpus_allocated"]["max"]
        m["pods_per_gpu_max"] = m["pods_per_gpu"]["max"]
        m["fragmented_gpus_max"] = m["fragmented_gpus"]["max"]
        m["claim_to_running_ms_p99"] = m["latency_ms"]["created_to_running"]["p99"]
        m["unschedulable_reasons"] = self._reasons()
        m["mode"] = self._mode()
        measurements = summary.setdefault("measurements", {})
        measurements["dra"] = m
        summary["dra_series"] = dm["series"]
        sources = summary.setdefault("sources", {})
        sources["dra"] = dict(SOURCES, integrity="a LIST of resourceclaims at the end against the claim timeline; "
                              "left allocated = allocated at the end with every pod that used it ended",
                              unschedulable_reasons="pods of the run Pending at the end: their PodScheduled=False "
                              "message, counted")
        prom = summary.get("prometheus") or {}
        if prom.get("url"):
            try:
                start, stop = prom.get("window") or [t0, end]
                measurements["dra_scheduler"] = dra_prom_figures(PromQueries(prom["url"]), float(start), float(stop))
                sources["dra_scheduler"] = measurements["dra_scheduler"]["queries"]
            except Exception as exc:  # the rest of the report stands without it
                self.errors.append(f"DRA PromQL failed: {exc.__class__.__name__}: {exc}")
        summary.setdefault("dra_timeline", {"claims": len(claims), "events": self.collector.timeline.events,
                                            "restarts": self.collector.restarts[:10]})

    def _mode(self) -> dict[str, Any]:
        v = next((v for v in self.sc.variants if v.name == self.sc.variant), None)
        exposes = sorted({p.gpus.expose if p.gpus is not None else "counted" for p in self.sc.pools if p.gpu_count})
        return {"gpus": getattr(v, "gpus", None) or "as written", "gpu_sharing": getattr(v, "gpu_sharing", None),
                "pools_expose": exposes}

    def _list(self, path: str) -> list[dict[str, Any]]:
        assert self.endpoint is not None
        session = session_for(self.endpoint, 1)
        out: list[dict[str, Any]] = []
        for ns in self.sc.namespaces:
            out += list_all(session, self.endpoint.server, path.format(ns=ns))
        return out

    def _integrity(self, claims: Sequence[Any]) -> dict[str, Any]:
        try:
            listed = self._list(CLAIMS_PATH)
        except Exception as exc:
            return {"error": f"{exc.__class__.__name__}: {exc}"}
        known = {c.uid: c for c in claims}
        allocated = [c for c in listed if (c.get("status") or {}).get("allocation")]
        missing = [c["metadata"]["name"] for c in allocated
                   if c["metadata"]["uid"] not in known or known[c["metadata"]["uid"]].allocated_ms is None]
        return {"allocated_in_apiserver": len(allocated), "not_in_timeline": len(missing),
                "not_in_timeline_names": missing[:20], "left_allocated_after_pods_ended": self._held_without_pods()}

    def _reasons(self) -> dict[str, int]:
        try:
            pods = self._list("/api/v1/namespaces/{ns}/pods")
        except Exception as exc:
            return {f"error: {exc.__class__.__name__}": 1}
        reasons: Counter[str] = Counter()
        for p in pods:
            if (p.get("status") or {}).get("phase") != "Pending" or (p.get("spec") or {}).get("nodeName"):
                continue
            for c in (p.get("status") or {}).get("conditions") or ():
                if c.get("type") == "PodScheduled" and c.get("status") == "False":
                    reasons[str(c.get("message") or c.get("reason") or "?")[:300]] += 1
        return dict(reasons.most_common(10))

    # ------------------------------------------------------------------------------------ report and teardown
    def markdown(self, summary: dict[str, Any]) -> list[str]:
        return self.section.markdown(summary)

    def html(self, summary: dict[str, Any]) -> list[str]:
        return self.section.html(summary)

    def teardown(self) -> list[str]:
        """Stop the watches; delete the DeviceClasses this run created (by uid); the errors."""
        if self.collector is not None:
            self.collector.stop(timeout_s=8)
        return self.classes.delete_all() if self.classes is not None else []
