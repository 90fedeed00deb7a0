"""``agents.placement: in-cluster``: the hollow agents, Locust (master and workers) and Prometheus as pods
of ``deploy/hollowscale`` on the cluster's real nodes (the local cluster's, or kind's workers;
:class:`~.deployment.InClusterDeployment` makes and removes them); the run watches them through the addresses
their network gives the harness (:mod:`~.network`) and the API."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from hollowscale.measure.prom import Target, targets_health, wait_scraped
from hollowscale.placements.base import Log, PlacementSettings, Sleep
from hollowscale.placements.incluster import pods as podwait
from hollowscale.placements.incluster.deployment import InClusterDeployment

#: the master's files the failure watch reads while the load runs (the rest are copied at the end)
LIVE_FILES = ("locust_stats.csv", "locust_failures.csv")


class AgentPods:
    """The agent StatefulSet's pods, at the addresses the driver's network gives; the kubelet restarts a
    crashed agent, this notices and records it."""

    def __init__(self, deployment: InClusterDeployment) -> None:
        self.deployment = deployment
        self.restarts: list[dict[str, Any]] = []
        self._next_check = 0.0
        self._restarts_seen: dict[str, int] = {}

    @property
    def addresses(self) -> list[str]:
        return self.deployment.agent_addresses()

    def pids(self) -> dict[str, int]:
        return {}  # processes of the pods, not of the harness

    def _agent_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.deployment.pods() if p["metadata"]["name"].startswith("hollow-agent-")]

    def _due(self) -> bool:
        """At most one look at the pods every 5 s."""
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + 5.0
        return True

    def dead(self) -> str | None:
        if not self._due():
            return None
        try:
            pods = self._agent_pods()
        except requests.RequestException:
            return None
        for pod in pods:
            why = podwait.why_not_starting(pod)
            if why:
                return f"hollow agent pod {pod['metadata']['name']}: {why}"
        return None

    def supervise(self, log: Log) -> None:
        if not self._due():
            return
        try:
            pods = self._agent_pods()
        except requests.RequestException:
            return
        for pod in pods:
            name = pod["metadata"]["name"]
            count = sum(cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get("containerStatuses") or [])
            if count > self._restarts_seen.get(name, 0):
                shard = int(name.rsplit("-", 1)[1])
                self.restarts.append({"t": round(time.time(), 3), "shard": shard, "event": "restarted by the kubelet",
                                      "pod": name, "restarts": count})
                log(f"hollow agent pod {name} restarted by its kubelet ({count} restart(s))")
            self._restarts_seen[name] = count


class PrometheusPod:
    """The run's Prometheus pod, asked where the driver's network lets the harness reach it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def exited(self) -> str | None:
        return None  # a pod: the kubelet restarts it; it is deleted with the run's other pods

    def targets_health(self) -> dict[str, str]:
        return targets_health(self.url)

    def wait_scraped(self, timeout_s: float = 30.0) -> dict[str, str]:
        return wait_scraped(self.url, timeout_s)


class LocustMasterDriver:
    """The load through the Locust master pod's web API; its statistics files copied into the run folder."""

    def __init__(self, deployment: InClusterDeployment, folder: Path, sleep: Sleep, log: Log) -> None:
        self.deployment = deployment
        self.master = deployment.locust()
        self.folder = folder
        self.sleep = sleep
        self.log = log
        self.running_seen = False
        self.state = "unknown"

    def start(self) -> float:
        self.log(f"locust master: {self.deployment.start_load(self.sleep)}")
        return time.time()

    def poll(self) -> bool:
        self.state = self.master.state()
        self.running_seen = self.running_seen or self.state in ("spawning", "running")
        self.master.save_files(self.folder, only=LIVE_FILES)
        return self.running_seen and self.state == "stopped"

    def stop(self) -> None:
        self.master.stop()  # the curve stops; its stats stay readable

    def finish(self, elapsed_s: float, duration_s: float) -> str | None:
        self.master.wait_final_stats(self.sleep)  # the workers' last reports reach the master after it stopped
        self.master.save_files(self.folder)
        if elapsed_s < duration_s - 5:
            return (f"the Locust master pod ended the load after {elapsed_s:.0f}s of {duration_s:g}s "
                    f"(state {self.state})")
        return None

    def pids(self) -> dict[str, int]:
        return {}


class InClusterPlacement:
    """The pods of ``deploy/hollowscale`` (see :mod:`~.deployment`) on the cluster's real nodes."""

    def __init__(self, settings: PlacementSettings) -> None:
        s = settings
        self.settings = settings
        self.deployment = InClusterDeployment(s.scenario, s.endpoint, s.kubeconfig, s.run_id, s.run_dir, s.log,
                                              s.real_nodes)
        self.agents = AgentPods(self.deployment)
        self.locust_workers: int | None = s.scenario.agents.locust_workers

    def start_agents(self, report: Callable[[int, int], None]) -> None:
        """Refuses (:class:`~.deployment.InClusterError`) a cluster without real nodes hollowscale knows; else
        images, credentials, the pods, every one Ready (``report(ready, expected)``)."""
        self.deployment.check()
        self.deployment.deploy(self.settings.sleep, report)

    def start_prometheus(self, cluster_targets: list[Target]) -> PrometheusPod:
        """The Prometheus pod (Ready with the others; its scrape targets are in its manifests)."""
        return PrometheusPod(self.deployment.prometheus_url())

    def load_driver(self, load_spec: Path, folder: Path) -> LocustMasterDriver:
        return LocustMasterDriver(self.deployment, folder, self.settings.sleep, self.settings.log)

    def stop(self) -> list[str]:
        """Delete the pods (each agent deletes its nodes) and every object of the run; their logs saved first."""
        return self.deployment.teardown(logs=self.settings.run_dir / "logs")

    def summary_section(self) -> dict[str, Any]:
        return {"incluster": self.deployment.section()}
