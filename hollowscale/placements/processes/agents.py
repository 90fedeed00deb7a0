"""The run's hollow agents as processes beside the harness: one agent per shard, restarted when it exits.

Agents are started through the hollow engine's own helper (:func:`hollow.process.start_agent`): each
binds its control port itself (``--metrics-port 0``) and announces it, so no port is ever guessed
and raced for.  (The ownership check before they start and the Ready barrier after are the same
wherever the agents run: :mod:`hollowscale.placements.nodes`.)

An agent shard that exits during a run is started again with the kubelet's crash-loop backoff (the
agent is restart-safe: it adopts the nodes and pods it finds), on the same control port so
Prometheus keeps scraping it; each restart is recorded for the report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hollow.process import AgentProcess, start_agent
from hollowscale.cluster.supervisor import BackoffPolicy, exit_text
from hollowscale.placements.children import Children
from hollowscale.scenario import Scenario


class Agents:
    """The hollow agents of one run (one per shard)."""

    def __init__(self, scenario: Scenario, kubeconfig: Path, run_dir: Path, children: Children):
        self.sc = scenario
        self.kubeconfig = kubeconfig
        self.run_dir = run_dir
        self.children = children
        self.procs: list[AgentProcess] = []
        self.args: list[list[str]] = []
        self.policy = BackoffPolicy.from_env()
        self.restarts: list[dict[str, Any]] = []
        self._crashes: dict[int, int] = {}
        self._due: dict[int, float] = {}
        self._started_at: dict[int, float] = {}

    @property
    def addresses(self) -> list[str]:
        return [f"{a.host}:{a.port}" for a in self.procs]

    def pids(self) -> dict[str, int]:
        return {f"agent-{i}": a.proc.pid for i, a in enumerate(self.procs) if a.proc.poll() is None}

    def start(self, timeout_s: float = 60.0) -> None:
        """Write the pools file and start one agent per shard (each announces its own port)."""
        pools_file = self.run_dir / "pools.yaml"
        pools_file.write_text(yaml.safe_dump(self.sc.pools_doc(), sort_keys=False))
        n = self.sc.agents.shards
        for i in range(n):
            args = ["--shard", f"{i}/{n}", "--metrics-host", "127.0.0.1"]
            if self.sc.agents.delete_nodes_on_exit:
                args.append("--delete-nodes-on-exit")
            args += list(self.sc.agents.args)
            self.args.append(args)
            self.procs.append(self._start_shard(i, 0, timeout_s))

    def _start_shard(self, i: int, port: int, timeout_s: float = 60.0) -> AgentProcess:
        args = [*self.args[i], "--metrics-port", str(port)]
        agent = start_agent(self.kubeconfig, self.run_dir / "pools.yaml", self.run_dir / "logs" / f"agent-{i}.log",
                            *args, python=sys.executable, timeout_s=timeout_s)
        self.children.adopt(f"agent-{i}", [sys.executable, "-m", "hollow", "run", *args], agent.log_path, agent.proc)
        self._started_at[i] = time.time()
        return agent

    def supervise(self, log: Callable[[str], None]) -> None:
        """Start again, after the crash-loop backoff, every shard that exited (same control port)."""
        now = time.time()
        for i, a in enumerate(self.procs):
            code = a.proc.poll()
            if code is None:
                continue
            if i not in self._due:
                ran = now - self._started_at.get(i, now)
                self._crashes[i] = 1 if ran >= self.policy.reset_after_s else self._crashes.get(i, 0) + 1
                delay = self.policy.delay(self._crashes[i])
                self._due[i] = now + delay
                self.restarts.append({"t": round(now, 3), "shard": i, "event": "exited", "exit": exit_text(code),
                                      "ran_s": round(ran, 3), "restart_in_s": delay, "log": str(a.log_path)})
                log(f"hollow agent agent-{i} exited ({exit_text(code)}); restarting in {delay:g}s")
            elif now >= self._due[i]:
                del self._due[i]
                self.procs[i] = self._start_shard(i, a.port)
                self.restarts.append({"t": round(time.time(), 3), "shard": i, "event": "started",
                                      "pid": self.procs[i].proc.pid, "port": a.port})
                log(f"hollow agent agent-{i} started again (pid {self.procs[i].proc.pid}, port {a.port})")

    def dead(self) -> str | None:
        """Why an agent is no longer running, or None when all are (before the load: a failed start)."""
        for i, a in enumerate(self.procs):
            if a.proc.poll() is not None:
                return f"hollow agent agent-{i} exited with {a.proc.returncode} (log: {a.log_path})"
        return None

    def stop(self, grace_s: float = 90.0) -> None:
        """SIGTERM every agent first (each deletes its nodes in parallel), then wait for each."""
        for a in self.procs:
            a.terminate()  # once: a second SIGTERM makes an agent exit at once, skipping the cleanup
        for a in self.procs:
            a.stop(timeout_s=grace_s)
