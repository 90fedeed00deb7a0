"""``agents.placement: process``: the hollow agents, Locust and Prometheus as processes beside the harness,
each in its own session and recorded in the run's ``pids.json``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hollowscale.measure.prom import PrometheusServer, Target
from hollowscale.placements.base import PlacementSettings
from hollowscale.placements.processes.agents import Agents
from hollowscale.placements.processes.locust import LocustProcess


class ProcessPlacement:
    """Everything on this machine: one agent process per shard, one Prometheus, one headless Locust."""

    locust_workers: int | None = None

    def __init__(self, settings: PlacementSettings) -> None:
        self.settings = settings
        self.agents = Agents(settings.scenario, settings.kubeconfig, settings.run_dir, settings.children)
        self.prometheus: PrometheusServer | None = None

    def start_agents(self, report: Callable[[int, int], None]) -> None:
        self.agents.start()

    def start_prometheus(self, cluster_targets: list[Target]) -> PrometheusServer:
        s = self.settings
        targets = [*cluster_targets, Target("hollow-agents", "http", self.agents.addresses)]
        self.prometheus = PrometheusServer(s.run_dir / "prometheus", targets, s.scenario.measurements.scrape_interval_s)
        self.prometheus.start()
        s.children.note("prometheus", self.prometheus.pid)
        return self.prometheus

    def load_driver(self, load_spec: Path, folder: Path) -> LocustProcess:
        s = self.settings
        return LocustProcess(s.children, s.kubeconfig, load_spec, s.run_id, folder, s.run_dir / "logs" / "locust.log",
                             s.locust_processes)

    def stop(self) -> list[str]:
        self.agents.stop(grace_s=90)  # SIGTERM: each agent deletes its nodes (--delete-nodes-on-exit)
        if self.prometheus is not None:
            self.prometheus.stop()
        return []

    def summary_section(self) -> dict[str, Any]:
        return {}
