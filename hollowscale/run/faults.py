"""A run's faults, each fired at its time through whoever owns what it breaks, and logged for the report.

One handler per fault type: agent faults (``heartbeat-loss``, ``pod-failures``) are posted to every
agent's control port (the same on 127.0.0.1 wherever the agents run); faults aimed at the jobs (node faults,
``pod-failures`` with a ``workload``, ``count`` or rate, and fault processes) pick their targets from the
run's pod timeline and fire through :mod:`hollowscale.run.jobfaults`; control-plane faults
(``component-stall``, ``-kill``, ``-restart``) go through the cluster's supervisor
(:class:`hollowscale.backends.base.ControlPlane`: only the local cluster has one); a feature of the run
brings the handlers of its own faults (the distillation jobs' ``teacher-kill`` and ``teacher-scale``).
Each handler returns the fault's entry for ``summary.json`` ``faults``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Protocol, runtime_checkable

from hollowscale.backends import ControlPlane
from hollowscale.measure.timeline import Timeline
from hollowscale.placements import AgentFleet
from hollowscale.run.jobfaults import JobFaults, agents_session, post_to_agents
from hollowscale.run.schedule import LoadSchedule
from hollowscale.scenario import FaultSpec, Scenario
from hollowscale.scenario.model import AGENT_FAULTS, COMPONENT_FAULTS, NODE_FAULTS
from hollowscale.timestamps import iso
from kubecore.config import KubeEndpoint

FaultHandler = Callable[[FaultSpec], dict[str, Any]]


@runtime_checkable
class InjectsFaults(Protocol):
    """A feature of the run that brings fault types of its own (:mod:`hollowscale.run.features`)."""

    def fault_handlers(self) -> dict[str, FaultHandler]:
        """fault type -> the handler that fires it and returns its entry."""
        ...


#: how long after a control-plane fault ends failed creates are still its effect, not a failed load
TOLERATE_AFTER_S = 120.0


class Faults:
    """The scenario's faults: scheduled when the load starts, fired by type, logged in :attr:`entries`."""

    def __init__(self, sc: Scenario, log: Callable[[str], None], errors: list[str]) -> None:
        self.sc = sc
        self.log = log
        self.errors = errors
        #: each fired fault's entry (``summary.json`` ``faults``), in firing order
        self.entries: list[dict[str, Any]] = []
        #: monotonic time until which failed creates are a control-plane fault's effect
        self.tolerate_failures_until = 0.0
        self.agents: AgentFleet | None = None
        self.control_plane: ControlPlane | None = None
        self.jobs: JobFaults | None = None
        self.handlers: dict[str, FaultHandler] = {**dict.fromkeys(AGENT_FAULTS, self._agent_fault),
                                                  **dict.fromkeys(NODE_FAULTS, self._job_fault),
                                                  **dict.fromkeys(COMPONENT_FAULTS, self._component_fault)}

    def start(self, schedule: LoadSchedule, agents: AgentFleet, control_plane: ControlPlane,
              features: Sequence[InjectsFaults], timeline: Timeline | None = None,
              endpoint: KubeEndpoint | None = None) -> None:
        """Schedule every fault at its ``at_s``; ``features``: those that bring fault types of their own;
        ``timeline`` and ``endpoint``: where the faults aimed at jobs find their targets and drain nodes.
        The fault processes stop when ``schedule`` is cancelled."""
        self.agents, self.control_plane = agents, control_plane
        self.jobs = JobFaults(lambda: agents.addresses, endpoint, timeline, self.log, self.errors)
        schedule.on_cancel.append(self.stop)
        self.handlers.update({t: h for f in features for t, h in f.fault_handlers().items()})
        for i in range(len(self.sc.faults)):
            schedule.at(self.sc.faults[i].at_s, partial(self.fire, i))

    def fire(self, index: int) -> None:
        f = self.sc.faults[index]
        handler = self.handlers.get(f.type)
        if handler is None:
            self.errors.append(f"fault {f.type}: nothing in this run handles it")
            return
        self.entries.append(handler(f))

    def excuse(self, failed: str | None) -> str | None:
        """A wholesale create failure, unless a control-plane fault is (or was just) under way."""
        return None if failed and time.monotonic() < self.tolerate_failures_until else failed

    def stop(self) -> None:
        """Stop the fault processes still firing (the run is being torn down)."""
        if self.jobs is not None:
            self.jobs.stop()

    def _job_fault(self, f: FaultSpec) -> dict[str, Any]:
        """A fault aimed at the jobs' nodes or pods (:mod:`hollowscale.run.jobfaults`)."""
        if self.jobs is None:
            raise RuntimeError("faults fired before start()")
        return self.jobs.fire(f)

    def _agent_fault(self, f: FaultSpec) -> dict[str, Any]:
        """``POST /faults/<type>`` to every agent (a fault aimed at jobs: :meth:`_job_fault`)."""
        if f.aimed_at_jobs:
            return self._job_fault(f)
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "fraction": f.fraction, "duration_s": f.duration_s,
                                 "fired_at": iso(time.time()), "t": time.time(), "responses": []}
        body = {"fraction": f.fraction, "duration_s": f.duration_s, "seed": f.seed}
        if f.type == "pod-failures":
            body["exit_code"] = f.exit_code
        entry["responses"] = post_to_agents(agents_session(), self.agents.addresses if self.agents else [], f.type, body)
        self.log(f"fault {f.type} fired: {entry['responses']}")
        return entry

    def _component_fault(self, f: FaultSpec) -> dict[str, Any]:
        """Stall, kill or restart a control-plane component through the cluster's supervisor."""
        action = f.type.removeprefix("component-")
        now = time.time()
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "component": f.component,
                                 "duration_s": f.duration_s, "fired_at": iso(now), "t": now}
        # creates fail while the control plane is down: that is the fault, not a load that fails wholesale
        self.tolerate_failures_until = max(self.tolerate_failures_until,
                                           time.monotonic() + (f.duration_s or 0.0) + TOLERATE_AFTER_S)
        try:
            if self.control_plane is None or f.component is None:  # validation allows these on the local backend only
                raise ValueError("no local cluster of this run to inject it into")
            ack = self.control_plane.fault(action, f.component, f.duration_s or 0.0)
            entry["ack"] = ack
            entry["pid"] = ack.get("pid")
            if ack.get("event") == "request-refused":
                self.errors.append(f"fault {f.type} {f.component} refused by the supervisor: {ack.get('why')}")
        except (ValueError, TimeoutError) as exc:
            entry["error"] = str(exc)
            self.errors.append(f"fault {f.type} {f.component} not injected: {exc}")
        self.log(f"fault {f.type} {f.component} fired: {entry.get('ack', entry.get('error'))}")
        return entry
