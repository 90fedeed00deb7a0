"""The scenario's hollow nodes in the cluster, wherever their agents run: a node-ownership check before
any agent starts, and the Ready barrier before the load.

Before any agent starts, the cluster is checked for nodes that carry the scenario's node names but were
not registered by a hollow agent: an agent would adopt such a node and delete it at the end, and a run
never deletes what it did not create.  The barrier waits until every node of the pools is Ready and
free of the node lifecycle controller's taints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import requests

from hollow.nodebody import NODE_LABEL
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


def check_ownership(sc: Scenario, session: requests.Session, server: str) -> None:
    """Refuse to start when a node with one of the scenario's names is not a hollow node."""
    foreign = foreign_nodes(session, server, sc.node_names())
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise NodeOwnershipError(
            f"{len(foreign)} node(s) with this scenario's names exist and were not registered by a hollow "
            f"agent ({shown}); the agents would take them over and delete them at the end. Rename the pools.")


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


class ReadyBarrier:
    """Waits until every node of the scenario's pools is Ready (or the scenario's ready timeout).

    Attributes:
        retries: transient errors it asked again after (kept for the run's errors list).
    """

    def __init__(self, sc: Scenario, logs: Path) -> None:
        """``logs``: where the agents' logs are (named when the barrier times out)."""
        self.sc = sc
        self.logs = logs
        self.retries: list[str] = []

    def wait(self, session: requests.Session, server: str, sleep: Callable[[float], None],
             report: Callable[[int, int], None]) -> int:
        """Block until every node is Ready; ``report(ready, expected)`` after each look."""
        names = self.sc.node_names()
        deadline = time.monotonic() + self.sc.agents.ready_timeout_s
        ready = 0
        while True:
            try:
                ready = ready_nodes(session, server, names)
            except (requests.ConnectionError, requests.Timeout) as exc:  # the apiserver busy or restarting
                self.retries.append(str(exc)[:200])
            except requests.HTTPError as exc:
                # 5xx (a 504 on a LIST while thousands of nodes register on 2 cores) and 429: ask again
                code = exc.response.status_code if exc.response is not None else 0
                if code < 500 and code != 429:
                    raise
                self.retries.append(f"HTTP {code}")
            report(ready, len(names))
            if ready >= len(names):
                return ready
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ready barrier: {ready}/{len(names)} nodes Ready after "
                                   f"{self.sc.agents.ready_timeout_s:g}s (agent logs in {self.logs})")
            sleep(2.0)
