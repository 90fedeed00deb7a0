"""Where a run's hollow agents, Locust and Prometheus run, behind one interface.

A placement starts the agents (then the run's Ready barrier waits for their nodes), the run's
Prometheus, and the load; ``stop`` ends what it started, agents first (each deletes its nodes).  What
the run watches while they work is in three small views: :class:`AgentFleet`, :class:`MetricsServer`
and :class:`LoadDriver`.  Implementations: :mod:`.processes` (processes beside the harness) and
:mod:`.incluster` (pods in the cluster); the registry is :data:`hollowscale.placements.PLACEMENTS`,
keyed by the scenario's ``agents.placement``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hollowscale.cluster.realnode.access import NoRealNodes, RealNodeAccess
from hollowscale.measure.prom import Target
from hollowscale.placements.children import Children
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint

Log = Callable[[str], None]
Sleep = Callable[[float], None]


class AgentFleet(Protocol):
    """The run's hollow agents as the run watches them."""

    #: each restart of an agent (time, shard, event, ...), for the report
    restarts: list[dict[str, Any]]

    @property
    def addresses(self) -> list[str]:
        """Each agent's control and metrics server as ``host:port`` the harness reaches (faults are posted
        there): ``127.0.0.1:PORT`` beside the harness or on a host network, a node's address elsewhere."""
        ...

    def pids(self) -> dict[str, int]:
        """name -> pid of the agents running as this machine's processes (for CPU and memory)."""
        ...

    def dead(self) -> str | None:
        """Before the load: why an agent is not running (a failed start), or None."""
        ...

    def supervise(self, log: Log) -> None:
        """During the load: notice agents that exited and were (or will be) started again."""
        ...


class MetricsServer(Protocol):
    """The run's Prometheus as the run asks it."""

    @property
    def url(self) -> str:
        ...

    def exited(self) -> str | None:
        """Why it no longer serves (a process of the run that exited), or None."""
        ...

    def targets_health(self) -> dict[str, str]:
        """job -> health of its scrape targets."""
        ...

    def wait_scraped(self, timeout_s: float = 30.0) -> dict[str, str]:
        """Until every target was scraped once (bounded); the health."""
        ...


class LoadDriver(Protocol):
    """The Locust that submits the load, as the run's load phase drives it."""

    def start(self) -> float:
        """Start the arrival curve; the wall time the load starts at."""
        ...

    def poll(self) -> bool:
        """One look a second (its statistics files brought up to date): True once the curve has ended."""
        ...

    def stop(self) -> None:
        """End the curve now (a load that failed, ran too long, or a run that ends)."""
        ...

    def finish(self, elapsed_s: float, duration_s: float) -> str | None:
        """After the curve: the final statistics in the run folder; why the load ended early, or None."""
        ...

    def pids(self) -> dict[str, int]:
        """name -> pid of Locust processes of this machine."""
        ...


class Placement(Protocol):
    """Where the agents, Locust and Prometheus of one run live."""

    @property
    def agents(self) -> AgentFleet:
        """The agents, watchable from the start (before ``start_agents`` there are none)."""
        ...

    @property
    def locust_workers(self) -> int | None:
        """Locust workers beside a master (``summary.load.locust_workers``), None for one headless Locust."""
        ...

    def start_agents(self, report: Callable[[int, int], None]) -> None:
        """Start the agents (``report(ready, expected)`` while something they need gets Ready)."""
        ...

    def start_prometheus(self, cluster_targets: list[Target]) -> MetricsServer:
        """The run's Prometheus, scraping the control plane and the agents."""
        ...

    def load_driver(self, load_spec: Path, folder: Path) -> LoadDriver:
        """The Locust of this run, its statistics files written into ``folder``."""
        ...

    def stop(self) -> list[str]:
        """Stop what it started, agents first (each deletes its nodes); errors."""
        ...

    def summary_section(self) -> dict[str, Any]:
        """What ``summary.json`` says about where they ran (top-level keys; none for processes)."""
        ...


@dataclass(frozen=True)
class PlacementSettings:
    """What every placement is built from.

    Attributes:
        scenario: the run's scenario (``agents``, ``pools``, the load).
        endpoint: the harness's view of the cluster.
        kubeconfig: the one file the agents and Locust use.
        run_id: the run's id (labels, names).
        run_dir: the run's folder (logs, pools file, Prometheus TSDB).
        children: the run's process registry (``pids.json``).
        log: the run's progress log.
        sleep: the run's sleep (it watches the run's processes while it waits).
        locust_processes: Locust processes of a headless Locust (``--processes``).
        real_nodes: the cluster's real nodes, as its backend knows them (where in-cluster pods run).
    """

    scenario: Scenario
    endpoint: KubeEndpoint
    kubeconfig: Path
    run_id: str
    run_dir: Path
    children: Children
    log: Log
    sleep: Sleep
    locust_processes: int = 1
    real_nodes: RealNodeAccess = field(default_factory=NoRealNodes)
