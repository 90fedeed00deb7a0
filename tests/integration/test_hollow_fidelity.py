"""Hollow fidelity, checked against the real kubelet: the same pod specs on a real and a hollow node.

One real node (the ``real_cluster`` session fixture: a real kubelet and containerd) and one hollow node
(an agent with a one-node pool, tainted so nothing else lands there) in the same cluster.  For each
case (exit 0, exit 3, a readiness probe with an initial delay, deletion with a grace period) the same
container spec runs on each node, pinned by node selector and toleration; the hollow pod also carries
the ``hollowscale.io/*`` annotations that tell the agent what the container would do (the kubelet
ignores them).  One raw watch of the namespace records every status each pod goes through, and
:func:`hollow.fidelity.compare` compares the two timelines: field set, conditions (type, status,
reason), container state shape, order of transitions.  The only differences allowed are the table
"Hollow-node fidelity: what is deliberately left out" of docs/hollow-fidelity.md, read from that page itself.

``HOLLOW_RECORD_FIDELITY=1`` also writes the recorded timelines to ``tests/fixtures/hollow/fidelity/``
(the offline test tests/unit/test_hollow_fidelity_recorded.py replays the real node's against the
agent's current code); they always go to ``tests/.artifacts/fidelity/`` for post-mortems.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines
from waiting import wait_until

from hollow.clock import parse_rfc3339
from hollow.fidelity import compare, left_out_paths
from hollow.process import start_agent
from hollowscale.cluster.realnode import pod_placement
from hollowscale.images import BUSYBOX_IMAGE
from kubecore.config import client_configuration

pytestmark = [pytest.mark.integration, pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / ".artifacts"
RECORDED = ROOT / "tests" / "fixtures" / "hollow" / "fidelity"
TAINT = "hollowscale.io/fidelity"
#: the service's shell: exits 0 on SIGTERM (busybox sh as PID 1 ignores it otherwise)
SERVE = "trap 'exit 0' TERM; sleep 3600 & wait"
PROBE = {"exec": {"command": ["true"]}, "initialDelaySeconds": 4, "periodSeconds": 2}


@dataclass(frozen=True)
class Case:
    """One pod spec run on both nodes.

    Attributes:
        name: pod name stem.
        policy: restartPolicy.
        script: what the real container runs (``sh -c``).
        annotations: what the hollow agent needs to do the same.
        probe: a readiness probe, or None.
        delete_grace: delete the pod with this grace once it is Ready (None: let it finish).
    """

    name: str
    policy: str
    script: str
    annotations: dict[str, str] = field(default_factory=dict)
    probe: dict[str, Any] | None = None
    delete_grace: int | None = None


CASES = (
    Case("success", "Never", "sleep 3; exit 0", {"hollowscale.io/run-duration": "3s"}),
    Case("failure", "Never", "sleep 3; exit 3",
         {"hollowscale.io/run-duration": "3s", "hollowscale.io/exit-code": "3"}),
    Case("probe", "Never", "sleep 12; exit 0", {"hollowscale.io/run-duration": "12s"}, probe=PROBE),
    Case("delete", "Always", SERVE, {"hollowscale.io/run-duration": "forever"}, delete_grace=10),
)


def pod_manifest(case: Case, side: str, placement: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", case.script],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
    }
    if case.probe:
        container["readinessProbe"] = case.probe
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{case.name}-{side}", "labels": {"fidelity-case": case.name, "fidelity-side": side},
                         "annotations": dict(case.annotations)},
            "spec": {"restartPolicy": case.policy, "terminationGracePeriodSeconds": 30,
                     "containers": [container], **placement}}


class Recorder:
    """One raw watch of the namespace (a thread): every status of every pod, in order, as JSON."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        core: Any = client.CoreV1Api(api)  # Any: the client's stubs type watch answers as lists
        self.core = core
        self.namespace = namespace
        self.statuses: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.deleted: set[str] = set()
        #: each pod as first seen (metadata and spec as admitted: defaults, service-account volume)
        self.first: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: str | None = None
        rv = core.list_namespaced_pod(namespace).metadata.resource_version
        self.thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self.thread.start()

    def _run(self, rv: str) -> None:
        try:
            while not self.stop.is_set():
                rv = self._watch(rv)
        except Exception as exc:  # reported by the test's loop
            if not self.stop.is_set():
                self.error = repr(exc)

    def _watch(self, rv: str) -> str:
        """One watch request from ``rv`` until the server ends it; returns the last version seen."""
        resp = self.core.list_namespaced_pod(self.namespace, watch=True, resource_version=rv,
                                             timeout_seconds=30, allow_watch_bookmarks=False,
                                             _preload_content=False)
        try:
            for line in iter_resp_lines(resp):
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch of {self.namespace} failed: {obj}")
                rv = obj["metadata"]["resourceVersion"]
                name = obj["metadata"]["name"]
                with self.lock:
                    self.first.setdefault(name, {"metadata": obj["metadata"], "spec": obj["spec"]})
                    seq = self.statuses[name]
                    if not seq or seq[-1] != obj.get("status"):
                        seq.append(obj.get("status") or {})
                    if event["type"] == "DELETED":
                        self.deleted.add(name)
                if self.stop.is_set():
                    break
        finally:
            resp.release_conn()
        return rv

    def of(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.statuses.get(name, ()))

    def done(self, name: str, deleting: bool) -> bool:
        with self.lock:
            if deleting:
                return name in self.deleted
            seq = self.statuses.get(name) or [{}]
            return seq[-1].get("phase") in ("Succeeded", "Failed")

    def ready(self, name: str) -> bool:
        seq = self.of(name)
        return bool(seq) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                 for c in seq[-1].get("conditions") or ())


@pytest.fixture(scope="module")
def sides(real_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The namespace, the real node's placement and a hollow node's (an agent of one node)."""
    prefix = f"fid{uuid.uuid4().hex[:5]}"
    work = tmp_path_factory.mktemp("fidelity")
    pools = work / "pools.yaml"
    pool = f"{prefix}-pool"
    pools.write_text(yaml.safe_dump({"pools": [{
        "name": pool, "count": 1,
        "resources": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
        "taints": [{"key": TAINT, "value": prefix, "effect": "NoSchedule"}],
        "lifecycle": {"startup_delay": "1s", "run_duration": "forever"},
    }]}))
    api = client.ApiClient(client_configuration(str(real_cluster.kubeconfig)))
    core: Any = client.CoreV1Api(api)  # Any: dict bodies and optional fields, as the other tests use it
    namespace = f"{prefix}-ns"
    core.create_namespace({"metadata": {"name": namespace}})
    wait_until("the default service account", lambda: core.list_namespaced_service_account(
        namespace, field_selector="metadata.name=default").items, 60)
    agent = start_agent(str(real_cluster.kubeconfig), pools, ARTIFACTS / f"fidelity-{prefix}" / "agent.log",
                        "--delete-nodes-on-exit", "--log-level", "INFO")
    try:
        agent.wait_healthy(120)
        wait_until("the hollow node Ready", lambda: [n for n in core.list_node(
            label_selector=f"hollowscale.io/pool={pool}").items if any(
            c.type == "Ready" and c.status == "True" for c in n.status.conditions or ())], 60)
        real = real_cluster.real_nodes[0].name
        yield {"api": api, "core": core, "namespace": namespace, "real": pod_placement(real),
               "hollow": {"nodeSelector": {"hollowscale.io/pool": pool},
                          "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]}}
    finally:
        agent.stop()
        core.delete_namespace(namespace)
        for node in core.list_node(label_selector=f"hollowscale.io/pool={pool}").items:
            core.delete_node(node.metadata.name)


@pytest.fixture(scope="module")
def recorded(sides: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Run every case on both nodes at once; {case: {"real": statuses, "hollow": statuses}}."""
    core, ns = sides["core"], sides["namespace"]
    rec = Recorder(sides["api"], ns)
    for case in CASES:
        for side in ("real", "hollow"):
            core.create_namespaced_pod(ns, pod_manifest(case, side, sides[side]))
    cases = {c.name: c for c in CASES}
    pending = {f"{c.name}-{s}": c.name for c in CASES for s in ("real", "hollow")}
    asked_delete: set[str] = set()
    deadline = time.monotonic() + 150
    while pending and time.monotonic() < deadline:
        for name, case_name in list(pending.items()):
            case = cases[case_name]
            if case.delete_grace is not None and name not in asked_delete and rec.ready(name):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=case.delete_grace)
                asked_delete.add(name)
            if rec.done(name, case.delete_grace is not None):
                del pending[name]
        assert rec.error is None, f"the watch of {ns} failed: {rec.error}"
        time.sleep(0.2)
    rec.stop.set()
    out = {c.name: {s: rec.of(f"{c.name}-{s}") for s in ("real", "hollow")} for c in CASES}
    target = ARTIFACTS / "fidelity"
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{ns}.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    if os.environ.get("HOLLOW_RECORD_FIDELITY") == "1":
        RECORDED.mkdir(parents=True, exist_ok=True)
        for case in CASES:
            (RECORDED / f"{case.name}.json").write_text(json.dumps({
                "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "kubernetes": "v1.36.3", "pod": rec.first[f"{case.name}-real"],
                # deleted (grace in seconds) as soon as the watch showed it Ready
                **({"delete_grace": case.delete_grace, "delete_after_ready_s": 0}
                   if case.delete_grace is not None else {}),
                "real": out[case.name]["real"]}, indent=1, sort_keys=True) + "\n")
    missing = sorted(pending)
    assert not missing, f"pods that did not finish within 150 s: {missing} (statuses in {target})"
    return out


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_hollow_status_matches_the_real_kubelet(recorded: dict[str, dict[str, list[dict[str, Any]]]],
                                                case: str) -> None:
    left_out = left_out_paths((ROOT / "docs" / "hollow-fidelity.md").read_text())
    real, hollow = recorded[case]["real"], recorded[case]["hollow"]
    result = compare(real, hollow, left_out)
    assert result.ok, f"{case}: hollow differs from the real kubelet:\n{result.describe()}"


def _final(statuses: list[dict[str, Any]]) -> dict[str, Any]:
    return {c["type"]: (c["status"], c.get("reason")) for c in statuses[-1].get("conditions") or ()}


def test_both_nodes_report_the_failure_as_the_kubelet_does(recorded: dict[str, Any]) -> None:
    for side in ("real", "hollow"):
        statuses = recorded["failure"][side]
        assert statuses[-1]["phase"] == "Failed", side
        assert _final(statuses)["Ready"] == ("False", "PodFailed"), side
        term = statuses[-1]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (3, "Error"), side


def test_ready_waits_for_the_probes_initial_delay_on_both_nodes(recorded: dict[str, Any]) -> None:
    for side in ("real", "hollow"):
        statuses = recorded["probe"][side]
        running = next(s for s in statuses if s.get("phase") == "Running")
        started = parse_rfc3339(running["containerStatuses"][0]["state"]["running"]["startedAt"])
        assert not running["containerStatuses"][0]["ready"], f"{side}: ready at the start"
        ready = next(s for s in statuses if any(c["type"] == "Ready" and c["status"] == "True"
                                                for c in s.get("conditions") or ()))
        at = next(parse_rfc3339(c["lastTransitionTime"]) for c in ready["conditions"] if c["type"] == "Ready")
        # never before the 4 s initial delay (second-resolution timestamps: 3 s after the truncated start at the
        # earliest); bounded from below only: how late a loaded machine's probe tick lands proves nothing
        assert at - started >= 3, f"{side}: Ready {at - started:.0f} s after the start"


def test_observed_generation_is_reported_on_both_nodes(recorded: dict[str, Any]) -> None:
    for side in ("real", "hollow"):
        last = recorded["success"][side][-1]
        assert last.get("observedGeneration") == 1, side
        assert {c["type"]: c.get("observedGeneration") for c in last["conditions"]} == {
            t: 1 for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled")
        }, side
