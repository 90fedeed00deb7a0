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
    assert name[0].isalpha() and len(name) <= 63 - len("-workers-0-2-abcde")  # the longest pod name fits 63
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


POD_POLICY: dict[str, Any] = {"fail_job_on_exit_codes": [42, 3], "ignore_disruptions": True}


def test_a_job_with_a_pod_failure_policy_and_a_backoff_limit_per_index() -> None:
    job = {"name": "train", "kind": "Job", "run_duration": "60s", "backoff_limit": 0,
           "roles": [{"name": "workers", "replicas": 4, "resources": {"cpu": "8"}}],
           "pod_failure_policy": POD_POLICY, "backoff_limit_per_index": 2}
    (sub,) = WorkloadMix(_spec(job), "r1").next_instance()
    spec = sub.body["spec"]
    assert spec["podFailurePolicy"] == {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [3, 42]}}]}
    assert (spec["completionMode"], spec["backoffLimitPerIndex"]) == ("Indexed", 2)
    assert "backoffLimit" not in spec  # the per-index limit governs; the Job's own defaults to unlimited
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # what a pod failure policy requires
    plain = WorkloadMix(_spec({**job, "pod_failure_policy": None, "backoff_limit_per_index": None}), "r1")
    assert {"podFailurePolicy", "backoffLimitPerIndex", "completionMode"}.isdisjoint(plain.next_instance()[0].body["spec"])
    # a JobSet's Jobs get the same fields
    (js,) = WorkloadMix(_spec({**TRAIN, "pod_failure_policy": POD_POLICY}), "r1").next_instance()
    assert js.body["spec"]["replicatedJobs"][1]["template"]["spec"]["podFailurePolicy"] == spec["podFailurePolicy"]


def test_bad_pod_failure_policies_are_refused_with_their_field() -> None:
    pod = {"name": "p", "kind": "Pod", "run_duration": "1s", "roles": [{"name": "a"}]}
    assert _errors({**pod, "pod_failure_policy": POD_POLICY, "backoff_limit_per_index": 1}) == [
        "workloads[0].pod_failure_policy: a Job's field: expected kind Job or JobSet, workload kind is Pod",
        "workloads[0].backoff_limit_per_index: a Job's field: expected kind Job or JobSet, workload kind is Pod"]
    assert _errors({**TRAIN, "pod_failure_policy": {"fail_job_on_exit_codes": [0, 256]}}) == [
        "workloads[0].pod_failure_policy.fail_job_on_exit_codes[0]: expected an integer >= 1, got 0",
        "workloads[0].pod_failure_policy.fail_job_on_exit_codes[1]: expected an integer <= 255, got 256"]


def test_a_long_workload_name_still_leaves_room_for_the_longest_pod_name() -> None:
    """JobSet's webhook refuses a JobSet whose pods would be named past 63 characters (<jobset>-<role>-0-<index> and
    a 5-character random suffix); a Locust stream id in the instance name made one of 21 characters too long."""
    w = {**TRAIN, "name": "train-jobset-blocking",
         "roles": [TRAIN["roles"][0], {**TRAIN["roles"][1], "replicas": 255}]}
    mix = WorkloadMix(_spec(w), "r1")
    mix.stream = "0-7f386dc0bc90"
    (sub,) = mix.next_instance()
    name = sub.body["metadata"]["name"]
    assert len(f"{name}-workers-0-254-abcde") <= 63, name
