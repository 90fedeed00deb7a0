"""loadgen's JobSet workloads (issue 36): one JobSet per instance, a replicated Job per role, the workload's
failure policy, rendered exactly; bad failure policies refused with their field.  Pure rendering, no server
(tests/integration/test_batch_cluster.py submits a rendered one to a real JobSet)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.schema import SpecError
from loadgen.spec import LoadSpec, parse_load_spec
from loadgen.workloads import ANN_GANG_MIN, ANN_RUN, LABEL_GANG, LABEL_INSTANCE, LABEL_ROLE, WorkloadMix

TRAIN: dict[str, Any] = {
    "name": "train", "kind": "JobSet", "run_duration": "60s", "backoff_limit": 0,
    "roles": [{"name": "leader", "resources": {"cpu": "4"}},
              {"name": "workers", "replicas": 3, "resources": {"cpu": "8", "nvidia.com/gpu": "8"}}],
    "failure_policy": {"max_restarts": 2, "restart_strategy": "BlockingRecreate",
                       "rules": [{"action": "FailJobSet", "on_job_failure_reasons": ["PodFailurePolicy"]},
                                 {"action": "RestartJobSet", "target_roles": ["workers"]}]},
}


def _spec(workload: dict[str, Any], **over: Any) -> LoadSpec:
    doc: dict[str, Any] = {"name": "js", "namespace": "load", "workloads": [workload],
                           "arrival": {"curve": "constant", "rate": 1, "duration_s": "60s", "seed": 7}, **over}
    return parse_load_spec(doc, "spec.yaml")


def _errors(workload: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        _spec(workload)
    return [line.removeprefix("spec.yaml: ") for line in str(info.value).splitlines()]


def test_one_jobset_per_instance_with_a_replicated_job_per_role_and_the_failure_policy() -> None:
    (sub,) = WorkloadMix(_spec(TRAIN), "r1").next_instance()
    assert (sub.kind, sub.path) == ("JobSet", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/load/jobsets")
    body = sub.body
    assert body["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and body["metadata"]["labels"][LABEL_INSTANCE]
    name = body["metadata"]["name"]
    assert name[0].isalpha() and len(name) <= 63 - len("-workers-0-2")  # the longest pod hostname fits 63
    spec = body["spec"]
    assert spec["failurePolicy"] == {"maxRestarts": 2, "restartStrategy": "BlockingRecreate", "rules": [
        {"name": "rule0", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"name": "rule1", "action": "RestartJobSet", "targetReplicatedJobs": ["workers"]}]}
    leader, workers = spec["replicatedJobs"]
    assert (leader["name"], leader["replicas"], workers["name"], workers["replicas"]) == ("leader", 1, "workers", 1)
    job = workers["template"]
    assert job["metadata"]["labels"][LABEL_ROLE] == "workers"  # the Jobs it makes are the run's, by role
    assert (job["spec"]["parallelism"], job["spec"]["completions"], job["spec"]["backoffLimit"]) == (3, 3, 0)
    pod = job["spec"]["template"]
    assert pod["spec"]["restartPolicy"] == "Never" and pod["metadata"]["annotations"][ANN_RUN] == "1m0s"
    assert pod["metadata"]["labels"][LABEL_INSTANCE] == body["metadata"]["labels"][LABEL_INSTANCE]
    assert LABEL_GANG not in pod["metadata"]["labels"]


def test_a_gang_jobset_labels_its_pods_with_the_jobset_as_the_gang() -> None:
    subs = WorkloadMix(_spec({**TRAIN, "gang": {}}, gang_scheduling=True), "r1").next_instance()
    assert [s.kind for s in subs] == ["Workload", "PodGroup", "JobSet"]
    js = subs[-1].body
    assert js["metadata"]["annotations"] == {ANN_GANG_MIN: "4"}
    pod = js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert pod["metadata"]["labels"][LABEL_GANG] == js["metadata"]["name"] == subs[1].body["metadata"]["name"]
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": js["metadata"]["name"]}


def test_the_spec_round_trips() -> None:
    spec = _spec(TRAIN)
    assert _spec(spec.to_doc()["workloads"][0]).workloads == spec.workloads


def test_bad_failure_policies_are_refused_with_their_field() -> None:
    job = {**TRAIN, "kind": "Job"}
    assert _errors(job) == ["workloads[0].failure_policy: a failure policy (max_restarts, restart_strategy, rules) "
                            "is JobSet's: expected kind JobSet, workload kind is Job"]
    fp = TRAIN["failure_policy"]
    assert _errors({**TRAIN, "failure_policy": {**fp, "max_restarts": -1}}) == [
        "workloads[0].failure_policy.max_restarts: expected an integer >= 0, got -1"]
    assert _errors({**TRAIN, "failure_policy": {**fp, "restart_strategy": "InPlaceRestart"}}) == [
        "workloads[0].failure_policy.restart_strategy: expected one of Recreate, BlockingRecreate, "
        "got 'InPlaceRestart'"]
    assert _errors({**TRAIN, "failure_policy": {"rules": [{"action": "RestartJobSet", "target_roles": ["ps"]}]}}) == [
        "workloads[0].failure_policy.rules[0].target_roles[0]: expected a role of the workload (leader, workers), "
        "got 'ps'"]
    assert _errors({**TRAIN, "failure_policy": {"rules": [{"action": "RestartJob"}]}}) == [
        "workloads[0].failure_policy.rules[0].action: expected one of FailJobSet, RestartJobSet, "
        "RestartJobSetAndIgnoreMaxRestarts, got 'RestartJob'"]
    assert _errors({**TRAIN, "run_duration": "forever"}) == [
        "workloads[0].run_duration: kind JobSet needs a finite run duration ('forever' never completes)"]
