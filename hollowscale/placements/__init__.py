"""Where a run's hollow agents, Locust and Prometheus run: one interface (:class:`.base.Placement`), one
folder per placement.

``agents.placement`` picks the entry of :data:`PLACEMENTS`; a new placement is a module with a class
built from :class:`.base.PlacementSettings` and an entry here (and its name in
:data:`hollowscale.scenario.model.PLACEMENTS`, which validation reads).  What is the same wherever the
agents run (the node-ownership check, the Ready barrier) is :mod:`.nodes`; the run's process registry
(``pids.json``) is :mod:`.children`.
"""

from __future__ import annotations

from collections.abc import Callable

from hollowscale.placements.base import AgentFleet, LoadDriver, MetricsServer, Placement, PlacementSettings
from hollowscale.placements.incluster.placement import InClusterPlacement
from hollowscale.placements.processes.placement import ProcessPlacement

#: ``agents.placement`` -> the placement's class
PLACEMENTS: dict[str, Callable[[PlacementSettings], Placement]] = {
    "process": ProcessPlacement,
    "in-cluster": InClusterPlacement,
}


def placement_for(settings: PlacementSettings) -> Placement:
    """The placement the scenario's ``agents.placement`` names."""
    return PLACEMENTS[settings.scenario.agents.placement](settings)


__all__ = ["PLACEMENTS", "AgentFleet", "LoadDriver", "MetricsServer", "Placement", "PlacementSettings",
           "placement_for"]
