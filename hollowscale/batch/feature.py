"""Batch scheduling as a feature of a run: its cluster objects (priority classes, Kueue's queues, Volcano's
queues) created before the agents start, and deleted, by uid, in the run's teardown.  The Runner
composes it through the hooks of :mod:`hollowscale.run.features`; a scenario without batch objects gets
none (every list of objects is then empty).  It hands the report the batch figures' section."""

from __future__ import annotations

from hollowscale.batch.objects import BatchObjects, kueue_objects, priority_objects, volcano_objects
from hollowscale.batch.report import BatchSection
from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint
from kubecore.namespaces import NamespaceClaim
from kubecore.watch import session_for


class BatchObjectsFeature(BatchSection):
    """The run's batch objects, created before the load and deleted after it; its section of the report
    (:class:`hollowscale.batch.report.BatchSection`: none for a run without batch figures)."""

    def __init__(self, sc: Scenario, run_id: str) -> None:
        self.sc = sc
        self.run_id = run_id
        self.objects: BatchObjects | None = None

    def prepare(self, endpoint: KubeEndpoint, real_nodes: RealNodeAccess, claims: list[NamespaceClaim]) -> None:
        """Create the scenario's priority classes and queues (an object of that name the run did not create
        stops the run: :class:`hollowscale.batch.objects.BatchObjectError`)."""
        self.objects = BatchObjects(session_for(endpoint, 1), endpoint.server, self.run_id)
        self.objects.create(priority_objects(self.sc, self.run_id) + kueue_objects(self.sc, self.run_id)
                            + volcano_objects(self.sc, self.run_id))

    def teardown(self) -> list[str]:
        """Delete what it created, newest first; the errors."""
        return self.objects.delete_all() if self.objects is not None else []
