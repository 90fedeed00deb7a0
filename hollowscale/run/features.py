"""The optional features a run composes, and the hooks each takes part in.

A feature is a room of its own (:mod:`hollowscale.distilljobs`, :mod:`hollowscale.batch`) that has
something to do in some phases of a run.  As in Kueue's jobframework, every feature implements a small
required interface (:class:`RunFeature`: tear down what it made) and, of the optional ones below, those
where it has work; as in kopf, the Runner wires them once (:func:`hooks_for`) and each phase calls the
features hooked there, in order, with no branch of its own:

- :class:`Prepares`: before the agents start (objects, namespaces, images the load needs);
- :class:`StartsWithLoad`: when the load starts (something scheduled later in it);
- :class:`InjectsFaults`: the fault types it fires (:mod:`hollowscale.run.faults`);
- :class:`HoldsSettle`: the run settles only once it has finished;
- :class:`UsesTimeline`: the run's pod and Job timeline, once it collects (read when it summarizes);
- :class:`Summarizes`: its part of ``summary.json``;
- :class:`hollowscale.report.sections.ReportSection`: its part of ``summary.md`` and ``report.html``.

A new feature is a room with a class implementing these, and a line in :func:`features_for`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from hollowscale.batch.feature import BatchObjectsFeature
from hollowscale.cluster.realnode.access import RealNodeAccess
from hollowscale.distilljobs.feature import DistillJobsFeature
from hollowscale.dra.feature import DraFeature
from hollowscale.dra.feature import applies as dra_applies
from hollowscale.measure.timeline import Timeline
from hollowscale.report.sections import ReportSection
from hollowscale.run.faults import InjectsFaults
from hollowscale.scenario import Scenario
from hollowscale.topology.feature import TopologyFeature
from hollowscale.topology.feature import applies as topology_applies
from hollowscale.training.feature import TrainingFeature
from hollowscale.training.feature import applies as training_applies
from kubecore.config import KubeEndpoint
from kubecore.namespaces import NamespaceClaim


class RunFeature(Protocol):
    """Required of every feature."""

    def teardown(self) -> list[str]:
        """Remove what it made (in the run's teardown, after the namespaces); the errors."""
        ...


@runtime_checkable
class Prepares(Protocol):
    def prepare(self, endpoint: KubeEndpoint, real_nodes: RealNodeAccess, claims: list[NamespaceClaim]) -> None:
        """Before the agents start; a namespace it claims goes into ``claims`` (released by the run)."""
        ...


@runtime_checkable
class StartsWithLoad(Protocol):
    def load_started(self, schedule: Callable[[float, Callable[[], None]], None]) -> None:
        """The load just started; ``schedule(delay_s, action)`` runs an action later in it."""
        ...


@runtime_checkable
class HoldsSettle(Protocol):
    def settled(self) -> bool:
        """Whether its part of the run has finished (the run settles once every workload object and this has)."""
        ...


@runtime_checkable
class UsesTimeline(Protocol):
    def use_timeline(self, timeline: Timeline) -> None:
        """The run's watch timeline of pods and Jobs, once it collects (before the agents start)."""
        ...


@runtime_checkable
class Summarizes(Protocol):
    def summarize(self, summary: dict[str, Any], t0: float) -> None:
        """Add its part to the assembled summary (``t0``: the load's start)."""
        ...


@dataclass(frozen=True)
class FeatureHooks:
    """The run's features, listed once per hook they implement (in the order of :func:`features_for`)."""

    all: tuple[RunFeature, ...]
    prepare: tuple[Prepares, ...]
    load_started: tuple[StartsWithLoad, ...]
    faults: tuple[InjectsFaults, ...]
    settle: tuple[HoldsSettle, ...]
    summary: tuple[Summarizes, ...]
    report: tuple[ReportSection, ...]
    timeline: tuple[UsesTimeline, ...] = ()


def hooks_for(features: Sequence[RunFeature]) -> FeatureHooks:
    """Wire each feature into the hooks it implements."""
    return FeatureHooks(all=tuple(features),
                        prepare=tuple(f for f in features if isinstance(f, Prepares)),
                        load_started=tuple(f for f in features if isinstance(f, StartsWithLoad)),
                        faults=tuple(f for f in features if isinstance(f, InjectsFaults)),
                        settle=tuple(f for f in features if isinstance(f, HoldsSettle)),
                        summary=tuple(f for f in features if isinstance(f, Summarizes)),
                        report=tuple(f for f in features if isinstance(f, ReportSection)),
                        timeline=tuple(f for f in features if isinstance(f, UsesTimeline)))


def features_for(sc: Scenario, run_id: str, log: Callable[[str], None], errors: list[str],
                 sleep: Callable[[float], None], phase: Callable[[str], None]) -> list[RunFeature]:
    """The features this scenario asks for, in the order their hooks run (and tear down)."""
    features: list[RunFeature] = []
    if sc.distill_jobs:
        features.append(DistillJobsFeature(sc, run_id, log, errors, sleep, phase))
    features.append(BatchObjectsFeature(sc, run_id))
    if dra_applies(sc):  # DeviceClasses, claims' dry run and templates, claim timeline (hollowscale/dra/)
        features.append(DraFeature(sc, run_id, log, errors))
    if topology_applies(sc):  # placement quality of the pools' topology levels (hollowscale/topology/)
        features.append(TopologyFeature(sc, log, errors))
    if training_applies(sc):  # recovery of training jobs from the faults aimed at them (hollowscale/training/)
        features.append(TrainingFeature(sc))
    return features
