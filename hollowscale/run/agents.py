"""The run's hollow agents: a node-ownership check, one agent per shard, the Ready barrier.

Agents are started through the hollow engine's own helper (:func:`hollow.process.start_agent`): each
binds its control port itself (``--metrics-port 0``) and announces it, so no port is ever guessed
and raced for.  Before any agent starts, the cluster is checked for nodes that carry the scenario's
node names but were not registered by a hollow agent: an agent would adopt such a node and delete
it at the end, and a run never deletes what it did not create.

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

import requests
import yaml

from hollow.nodebody import NODE_LABEL
from hollow.process import AgentProcess, start_agent
from hollowscale.cluster.supervisor import BackoffPolicy, exit_text
from hollowscale.run.children import Children
from hollowscale.scenario import Scenario
from kubecore.watch import list_all


class NodeOwnershipError(RuntimeError):
    """Nodes with the scenario's names exist and are not hollow nodes."""


def foreign_nodes(session: requests.Session, server: str, names: set[str]) -> list[str]:
    """Nodes named like ``names`` that a hollow agent did not register (sorted)."""
    out = []
    for node in list_all(session, server, "/api/v1/nodes"):
        meta = node.get("metadata") or {}
        if meta.get("name") in names and (meta.get("labels") or {}).get(NODE_LABEL) != "true":
            out.append(str(meta["name"]))
    return sorted(out)


def ready_nodes(session: requests.Session, server: str, names: set[str]) -> int:
    """How many of ``names`` are Ready and free of the node lifecycle controller's taints.

    Ready alone is not enough: the controller removes its not-ready/unreachable taints at the
    controller-manager's client QPS (20/s in the default profile), so 1,000 fresh nodes stay
    unschedulable for ~50 s after they report Ready.
    """
    ready = 0
    for node in list_all(session, server, "/api/v1/nodes", label_selector=f"{NODE_LABEL}=true"):
        if node["metadata"]["name"] not in names:
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        taints = (node.get("spec") or {}).get("taints") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) and not any(
                str(t.get("key", "")).startswith("node.kubernetes.io/") for t in taints):
            ready += 1
    return ready


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
        #: transient errors the Ready barrier asked again after (kept for the run's errors list)
        self.barrier_retries: list[str] = []
        self._crashes: dict[int, int] = {}
        self._due: dict[int, float] = {}
        self._started_at: dict[int, float] = {}

    @property
    def ports(self) -> list[int]:
        return [a.port for a in self.procs]

    def pids(self) -> dict[str, int]:
        return {f"agent-{i}": a.proc.pid for i, a in enumerate(self.procs) if a.proc.poll() is None}

    def check_ownership(self, session: requests.Session, server: str) -> None:
        """Refuse to start when a node with one of the scenario's names is not a hollow node."""
        foreign = foreign_nodes(session, server, self.sc.node_names())
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise NodeOwnershipError(
                f"{len(foreign)} node(s) with this scenario's names exist and were not registered by a hollow "
                f"agent ({shown}); the agents would take them over and delete them at the end. Rename the pools.")

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

    def wait_ready(self, session: requests.Session, server: str, sleep: Callable[[float], None],
                   report: Callable[[int, int], None]) -> int:
        """Block until every node of the pools is Ready (or the scenario's ready timeout)."""
        names = self.sc.node_names()
        deadline = time.monotonic() + self.sc.agents.ready_timeout_s
        ready = 0
        while True:
            try:
                ready = ready_nodes(session, server, names)
            except (requests.ConnectionError, requests.Timeout) as exc:  # the apiserver busy or restarting
                self.barrier_retries.append(str(exc)[:200])
            except requests.HTTPError as exc:
                # 5xx (a 504 on a LIST while thousands of nodes register on 2 cores) and 429: ask again
                code = exc.response.status_code if exc.response is not None else 0
                if code < 500 and code != 429:
                    raise
                self.barrier_retries.append(f"HTTP {code}")
            report(ready, len(names))
            if ready >= len(names):
                return ready
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ready barrier: {ready}/{len(names)} nodes Ready after "
                                   f"{self.sc.agents.ready_timeout_s:g}s (agent logs in {self.run_dir / 'logs'})")
            sleep(2.0)

    def stop(self, grace_s: float = 90.0) -> None:
        """SIGTERM every agent first (each deletes its nodes in parallel), then wait for each."""
        for a in self.procs:
            a.terminate()  # once: a second SIGTERM makes an agent exit at once, skipping the cleanup
        for a in self.procs:
            a.stop(timeout_s=grace_s)
