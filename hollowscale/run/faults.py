"""A run's faults, each fired at its time through whoever owns what it breaks, and logged for the report.

One handler per fault type: agent faults (``heartbeat-loss``, ``pod-failures``) are posted to every
agent's control port (the same on 127.0.0.1 wherever the agents run); control-plane faults
(``component-stall``, ``-kill``, ``-restart``) go through the cluster's supervisor
(:class:`hollowscale.backends.base.ControlPlane`: only the local cluster has one); a feature of the run
brings the handlers of its own faults (the distillation jobs' ``teacher-kill`` and ``teacher-scale``).
Each handler returns the fault's entry for ``summary.json`` ``faults``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import requests

from hollowscale.backends import ControlPlane
from hollowscale.placements import AgentFleet
from hollowscale.run.schedule import LoadSchedule
from hollowscale.scenario import FaultSpec, Scenario
from hollowscale.scenario.model import AGENT_FAULTS, COMPONENT_FAULTS
from hollowscale.timestamps import iso

FaultHandler = Callable[[FaultSpec], dict[str, Any]]
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
        self.handlers: dict[str, FaultHandler] = {**dict.fromkeys(AGENT_FAULTS, self._agent_fault),
                                                  **dict.fromkeys(COMPONENT_FAULTS, self._component_fault)}

    def start(self, schedule: LoadSchedule, agents: AgentFleet, control_plane: ControlPlane,
              handlers: dict[str, FaultHandler]) -> None:
        """Schedule every fault at its ``at_s``; ``handlers``: the features' own fault types."""
        self.agents, self.control_plane = agents, control_plane
        self.handlers.update(handlers)
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

    def _agent_fault(self, f: FaultSpec) -> dict[str, Any]:
        """``POST /faults/<type>`` to every agent."""
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "fraction": f.fraction, "duration_s": f.duration_s,
                                 "fired_at": iso(time.time()), "t": time.time(), "responses": []}
        body = {"fraction": f.fraction, "duration_s": f.duration_s, "seed": f.seed}
        if f.type == "pod-failures":
            body["exit_code"] = f.exit_code
        http = requests.Session()
        http.trust_env = False
        for port in self.agents.ports if self.agents else []:
            try:
                r = http.post(f"http://127.0.0.1:{port}/faults/{f.type}", json=body, timeout=10)
                entry["responses"].append({"port": port, "status": r.status_code, "body": r.text[:300]})
            except requests.RequestException as exc:
                entry["responses"].append({"port": port, "error": str(exc)})
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
