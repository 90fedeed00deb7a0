"""Who leads the scheduler and the controller-manager, and when the apiserver answered, over a run.

Both components elect a leader through a Lease in ``kube-system``; a stalled apiserver lets the lease
expire, the holder exits ("leaderelection lost") and its successor takes over under a new identity.
:class:`LeaderWatch` polls the two Leases once a second and keeps every change of holder, and every
stretch in which the apiserver did not answer at all, so the report can draw the control plane's own
timeline beside the faults (the same facts Prometheus shows as ``leader_election_master_status``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import requests

from kubecore.config import KubeEndpoint
from kubecore.watch import session_for

LEASES = ("kube-scheduler", "kube-controller-manager")


@dataclass
class LeaderChange:
    """A Lease whose holder changed (``holder`` empty: released or never held)."""

    t: float
    lease: str
    holder: str
    transitions: int | None


@dataclass
class Outage:
    """The apiserver did not answer from ``start`` to ``end`` (epoch s; ``end`` None while it lasts)."""

    start: float
    end: float | None = None
    error: str = ""


@dataclass
class LeaderWatch:
    """Polls the leader Leases every ``interval_s`` in a thread."""

    endpoint: KubeEndpoint
    interval_s: float = 1.0
    changes: list[LeaderChange] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)
    _holders: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def poll_once(self, session: requests.Session) -> None:
        """Read both Leases once, recording holder changes and the apiserver's availability."""
        now = time.time()
        for name in LEASES:
            try:
                r = session.get(f"{self.endpoint.server}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}",
                                timeout=max(self.interval_s, 2.0))
            except requests.RequestException as exc:
                if not self.outages or self.outages[-1].end is not None:
                    self.outages.append(Outage(now, error=f"{exc.__class__.__name__}"))
                return
            if self.outages and self.outages[-1].end is None:
                self.outages[-1].end = now
            if r.status_code != 200:
                continue
            spec = r.json().get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if self._holders.get(name) != holder:
                self._holders[name] = holder
                self.changes.append(LeaderChange(now, name, holder, spec.get("leaseTransitions")))

    def _run(self) -> None:
        session = session_for(self.endpoint, 1)
        while not self._stop.is_set():
            self.poll_once(session)
            self._stop.wait(self.interval_s)

    def report(self, t0: float) -> dict[str, Any]:
        """Changes and outages with times relative to ``t0`` (the load start)."""
        changes = [dict(asdict(c), at_s=round(c.t - t0, 3)) for c in self.changes]
        outages = [dict(asdict(o), at_s=round(o.start - t0, 3),
                        duration_s=round(o.end - o.start, 3) if o.end is not None else None) for o in self.outages]
        # the first sighting of each lease is where the run found it, not a change
        first = {c["lease"] for c in changes}
        handovers = {lease: max(0, sum(1 for c in changes if c["lease"] == lease and c["holder"]) - 1) for lease in first}
        return {"leader_changes": changes, "handovers": handovers, "apiserver_outages": outages,
                "source": f"GET kube-system Leases {', '.join(LEASES)} every {self.interval_s:g}s (holderIdentity)"}
