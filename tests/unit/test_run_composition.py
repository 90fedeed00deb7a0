"""How a run is composed: the cluster backend and the placement come from registries keyed by the
scenario's values, the features are wired once into the hooks they implement, faults go to the handler
of their type, and the orchestrator itself holds no branch on a backend or a placement."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from hollowscale.backends import BACKENDS
from hollowscale.backends.base import BackendSettings, UnseenControlPlane
from hollowscale.backends.existing import ExistingBackend
from hollowscale.batch.feature import BatchObjectsFeature
from hollowscale.cluster.realnode.access import NoRealNodes, RealNodeError
from hollowscale.distilljobs.feature import DistillJobsFeature
from hollowscale.placements import PLACEMENTS
from hollowscale.run.faults import Faults
from hollowscale.run.features import features_for, hooks_for
from hollowscale.run.schedule import LoadSchedule
from hollowscale.scenario import load_scenario
from hollowscale.scenario.model import BACKENDS as SCENARIO_BACKENDS
from hollowscale.scenario.model import PLACEMENTS as SCENARIO_PLACEMENTS

ROOT = Path(__file__).resolve().parents[2]
ORCHESTRATOR = ROOT / "hollowscale" / "run" / "orchestrator.py"


def test_every_backend_and_placement_a_scenario_may_name_is_registered() -> None:
    assert set(BACKENDS) == set(SCENARIO_BACKENDS)
    assert set(PLACEMENTS) == set(SCENARIO_PLACEMENTS)


def test_features_are_wired_into_the_hooks_they_implement() -> None:
    plain = load_scenario(ROOT / "scenarios" / "smoke.yaml")
    [batch] = features_for(plain, "r", print, [], lambda _s: None, lambda _p: None)
    hooks = hooks_for([batch])
    assert isinstance(batch, BatchObjectsFeature)
    assert hooks.prepare == (batch,) and hooks.all == (batch,)
    assert hooks.load_started == hooks.faults == hooks.settle == hooks.summary == ()
    assert hooks.report == (batch,)  # the batch figures' section (empty for a run without them)

    distill = load_scenario(ROOT / "scenarios" / "distill-e2e.yaml")
    jobs, batch = features_for(distill, "r", print, [], lambda _s: None, lambda _p: None)
    hooks = hooks_for([jobs, batch])
    assert isinstance(jobs, DistillJobsFeature)
    assert hooks.prepare == (jobs, batch)  # the order the run prepares and tears them down in
    assert hooks.load_started == hooks.faults == hooks.settle == hooks.summary == (jobs,)
    assert hooks.report == (jobs, batch)
    assert set(jobs.fault_handlers()) == {"teacher-kill", "teacher-scale"}
    assert jobs.settled() and jobs.teardown() == []  # nothing prepared: nothing to wait for or delete


class _Agents:
    def __init__(self) -> None:
        self.restarts: list[dict[str, Any]] = []
        self.addresses: list[str] = []

    def pids(self) -> dict[str, int]:
        return {}

    def dead(self) -> str | None:
        return None

    def supervise(self, log: Any) -> None:
        return None


class _Supervised(UnseenControlPlane):
    def fault(self, action: str, component: str, duration_s: float) -> dict[str, Any]:
        return {"event": "stalled", "component": component, "pid": 42, "action": action}


def _faults(tmp_path: Path, faults: str) -> tuple[Faults, list[str]]:
    path = tmp_path / "s.yaml"
    path.write_text((ROOT / "scenarios" / "smoke.yaml").read_text() + faults)
    errors: list[str] = []
    return Faults(load_scenario(path), lambda _m: None, errors), errors


def test_each_fault_goes_to_the_handler_of_its_type(tmp_path: Path) -> None:
    faults, errors = _faults(tmp_path, "faults:\n  - {type: component-stall, at_s: 5s, component: kube-scheduler, "
                                       "duration_s: 3s}\n  - {type: heartbeat-loss, at_s: 6s, fraction: 0.1, "
                                       "duration_s: 2s}\n")
    schedule = LoadSchedule()
    faults.start(schedule, _Agents(), _Supervised(), [])
    schedule.cancel()  # fired by hand below
    faults.fire(0)
    faults.fire(1)
    stall, beat = faults.entries
    assert stall["ack"]["action"] == "stall" and stall["pid"] == 42 and "error" not in stall
    assert faults.excuse("every create failed") is None  # creates may fail while the control plane is stalled
    assert beat["type"] == "heartbeat-loss" and beat["responses"] == []  # no agent ports here
    assert errors == []


def test_a_control_plane_fault_on_a_cluster_hollowscale_did_not_start_is_an_error(tmp_path: Path) -> None:
    faults, errors = _faults(tmp_path, "faults:\n  - {type: component-kill, at_s: 5s, component: etcd}\n")
    faults.start(LoadSchedule(), _Agents(), UnseenControlPlane(), [])
    faults.fire(0)
    assert faults.entries[0]["error"] == "no local cluster of this run to inject it into"
    assert errors == ["fault component-kill etcd not injected: no local cluster of this run to inject it into"]


def test_an_existing_cluster_is_never_taken_down(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "smoke.yaml")
    logged: list[str] = []
    ExistingBackend(BackendSettings(sc, tmp_path, keep_cluster=False, log=logged.append)).down()
    assert logged == [] and list(tmp_path.iterdir()) == []
    nothing = NoRealNodes()  # what such a cluster's real pods get: a clear refusal, no guess
    assert nothing.count == 0 and nothing.pod_apiserver is None
    with pytest.raises(RealNodeError, match="no real nodes hollowscale knows of"):
        nothing.host_dir(tmp_path)


def test_the_orchestrator_reads_as_phases_with_no_backend_or_placement_branch() -> None:
    source = ORCHESTRATOR.read_text()
    assert len(source.splitlines()) <= 400
    for branch in (r"\.backend\b", r"\.placement\s*==", r"in-cluster", r"incluster", r"getattr\(", r"hasattr\("):
        assert not re.search(branch, source), branch
    runner = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Runner")
    typed = [n for n in ast.walk(runner) if isinstance(n, ast.AnnAssign)]
    assert not [ast.unparse(n) for n in typed if ast.unparse(n.annotation) == "Any"], "an attribute typed Any"


def test_the_local_clusters_real_nodes_share_this_machine(tmp_path: Path) -> None:
    from hollowscale.cluster.realnode.access import LocalRealNodes

    nodes = LocalRealNodes(("/run/a.sock", "/run/b.sock"), ("127.0.0.1", 6443))
    assert nodes.count == 2
    assert nodes.pod_apiserver == ("127.0.0.1", 6443)  # no kube-proxy: pods reach the apiserver on loopback
    assert nodes.host_dir(tmp_path) == str(tmp_path)  # the nodes are this machine
