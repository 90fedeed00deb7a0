"""What a run with ``distill_jobs`` prepares before the load, and the jobs' part of its summary after it.

Before: the distill image is built (cached by content) and put on every real node (there is no
registry: :class:`hollowscale.cluster.realnode.access.RealNodeAccess`, the local nodes' containerd or
kind's), the teacher checkpoint is made sure of (the bench's: trained once and cached, seen by the
nodes where their cluster puts it), the jobs get a namespace of their own (created by the run, deleted after; an existing
one is used as it is and only the run's objects are deleted), and the objects are rendered from
``deploy/distill``.  After: the jobs' sections and their SLO figures go into the summary.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.distilljobs.figures import measurements
from hollowscale.distilljobs.jobs import DistillJobs
from hollowscale.distilljobs.manifests import RenderSettings
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint
from kubecore.namespaces import NamespaceClaim, claim_namespace
from kubecore.watch import session_for


class DistillSetupError(RuntimeError):
    """The run cannot start its distillation jobs (what is missing and how to get it)."""


def distill_namespace(sc: Scenario) -> str:
    return f"{sc.cluster.namespace}-distill"[:63]


def build_distill_jobs(sc: Scenario, real_nodes: RealNodeAccess, endpoint: KubeEndpoint, run_id: str,
                       claims: list[NamespaceClaim], log: Callable[[str], None]) -> DistillJobs:
    """Image on the real nodes, checkpoint (seen by them), namespace (appended to ``claims``), rendered
    jobs; nothing created yet."""
    if importlib.util.find_spec("torch") is None:
        raise DistillSetupError("distill_jobs need PyTorch here to train the teacher checkpoint once: run "
                                "`make setup-distill` (or `make setup-test`)")
    if not real_nodes.count:
        raise DistillSetupError("distill_jobs need real nodes, and the cluster has none (cluster.real_nodes; a "
                                "cluster started earlier without them must be stopped: hollowscale cluster down)")
    from hollowscale.images import build_images

    log("building the distill image (cached by content)")
    images = build_images(["distill"], progress=log)
    real_nodes.load_images(images, log)
    from distill.train_teacher import default_checkpoint, train_teacher

    checkpoint = default_checkpoint()  # the bench's teacher, so the accuracy compares with the bench's
    if not checkpoint.exists():
        log(f"no cached teacher: training it now into {checkpoint} (hollowscale distill train-teacher; minutes)")
        train_teacher(checkpoint)
    model_dir = real_nodes.host_dir(checkpoint.parent)
    server = endpoint.server
    session = session_for(endpoint, 2)
    claim = claim_namespace(session, server, distill_namespace(sc), run_id, log=log)
    claims.append(claim)
    settings = RenderSettings(namespace=claim.name, run_id=run_id, image=images[0].name, model_dir=model_dir,
                              apiserver=real_nodes.pod_apiserver, pull_never=True,
                              gang=sc.cluster.gang_scheduling,
                              gpus=sc.cluster.real_node_gpus.expose if sc.cluster.real_node_gpus else None)
    return DistillJobs(session, server, sc.distill_jobs, settings, log)


def add_distill_section(summary: dict[str, Any], jobs: DistillJobs, t0: float) -> None:
    """``summary["distill_jobs"]`` (one section per job) and ``measurements.distill`` (what SLOs name)."""
    jobs.stop_monitor()
    sections = jobs.report(t0)
    summary["distill_jobs"] = sections
    summary.setdefault("measurements", {})["distill"] = measurements(sections)
