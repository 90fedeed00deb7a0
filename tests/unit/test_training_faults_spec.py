"""The scenario fields of training jobs through failures: a workload's ``checkpoint_interval`` (validated,
rendered as ``hollowscale.io/checkpoint-interval`` on every pod) and the node faults and fault processes
(``node-lost``, ``node-drain``, ``rate_per_gpu_hour``, ``count``, ``workload``, ``repair_after_s``,
``delete_after_s``).  Validation and rendering only: nothing is started."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from hollow import stages
from hollowscale.scenario import ScenarioError, parse_scenario
from hollowscale.scenario.model import AGENT_FAULTS, FAULT_TYPES, NODE_FAULTS, FaultSpec
from kubecore.distributions import DurationDist, parse_dist
from kubecore.schema import SpecError, validate
from loadgen.spec import LoadSpec, parse_load_spec
from loadgen.workloads import ANN_CHECKPOINT, ANN_RUN, WorkloadMix, annotation_seconds

TRAIN: dict[str, Any] = {
    "name": "train", "kind": "Job", "run_duration": "10m", "same_duration": True, "gang": {},
    "checkpoint_interval": "2m",
    "roles": [{"name": "workers", "replicas": 2, "resources": {"cpu": "8", "nvidia.com/gpu": "8"}}],
}
SCENARIO: dict[str, Any] = {
    "name": "train-faults",
    "pools": [{"name": "gpu", "count": 4, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}}],
    "workloads": [TRAIN],
    "arrival": {"curve": "constant", "rate": 0.1, "duration_s": "20m"},
    "faults": [
        {"type": "node-lost", "at_s": "1m", "repair_after_s": "3m", "workload": "train"},
        {"type": "pod-failures", "at_s": "30s", "duration_s": "15m", "rate_per_gpu_hour": 0.5, "seed": 3},
    ],
}


@pytest.fixture(autouse=True)
def _no_ambient_kubeconfig(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _scenario(**over: Any) -> dict[str, Any]:
    doc = copy.deepcopy(SCENARIO)
    doc.update(copy.deepcopy(over))
    return doc


def _problems(doc: dict[str, Any]) -> dict[str, str]:
    """Each refused field path -> its message (one problem per field in these cases)."""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "s.yaml")
    for line in str(info.value).splitlines():
        assert line.startswith("s.yaml: "), line  # every problem names the file
    return {e.path: e.message for e in info.value.errors}


def _load(workload: dict[str, Any]) -> LoadSpec:
    return parse_load_spec({"name": "t", "namespace": "load", "workloads": [workload],
                            "arrival": {"curve": "constant", "rate": 1, "duration_s": "60s", "seed": 7}}, "spec.yaml")


def _workload_problems(workload: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        _load(workload)
    return {e.path: e.message for e in info.value.errors}


# ----------------------------------------------------------------------------------------- acceptance


def test_a_training_job_through_failures_validates() -> None:
    sc = parse_scenario(_scenario(), "s.yaml")
    (w,) = sc.workloads
    assert (w.checkpoint_interval, w.run_duration.upper_bound(), w.gang_min()) == (120.0, 600.0, 2)
    lost, failures = sc.faults
    assert lost.on_nodes and not lost.is_process and not lost.on_control_plane
    assert (lost.workload, lost.repair_after_s, lost.delete_after_s, lost.count, lost.fraction) == \
        ("train", 180.0, None, None, None)
    assert failures.is_process and not failures.on_nodes
    assert (failures.rate_per_gpu_hour, failures.duration_s, failures.count, failures.fraction) == (0.5, 900.0, None, None)
    assert sc.to_dict()["faults"][1]["rate_per_gpu_hour"] == 0.5


@pytest.mark.parametrize("fault", [
    {"type": "node-drain", "at_s": "1m"},
    {"type": "node-drain", "at_s": "1m", "fraction": 0.25, "repair_after_s": "2m"},
    {"type": "node-lost", "at_s": "1m", "count": 2, "delete_after_s": "30s"},
    {"type": "node-lost", "at_s": "1m", "rate_per_gpu_hour": 0, "duration_s": "10m"},  # a baseline: no faults
    {"type": "node-drain", "at_s": "1m", "rate_per_gpu_hour": 2.5, "duration_s": "10m", "count": 1},
    {"type": "pod-failures", "at_s": "1m", "rate_per_gpu_hour": 1, "duration_s": "10m", "count": 2,
     "workload": "train", "exit_code": 1},
    {"type": "pod-failures", "at_s": "1m", "fraction": 0.5, "workload": "train"},  # aimed, once
    {"type": "pod-failures", "at_s": "1m", "count": 1},
    {"type": "pod-failures", "at_s": "1m", "fraction": 0.1, "duration_s": "10s"},  # the share of all, for a while
    {"type": "heartbeat-loss", "at_s": "1m", "fraction": 0.1, "duration_s": "10s"},
])
def test_the_fault_shapes_that_are_accepted(fault: dict[str, Any]) -> None:
    (f,) = parse_scenario(_scenario(faults=[fault]), "s.yaml").faults
    assert f.on_nodes == (fault["type"] in NODE_FAULTS) and f.is_process == ("rate_per_gpu_hour" in fault)


def test_node_faults_are_fault_types_beside_the_agents() -> None:
    assert NODE_FAULTS == ("node-lost", "node-drain") and set(NODE_FAULTS) <= set(FAULT_TYPES)
    assert not set(NODE_FAULTS) & set(AGENT_FAULTS)


@pytest.mark.parametrize("backend", ["local", "kind"])
def test_node_faults_are_allowed_where_agent_faults_are(backend: str) -> None:
    """Node faults take hollow nodes: like agent faults (and unlike control-plane faults), on any backend."""
    doc = _scenario(faults=[{"type": "node-lost", "at_s": "1m"}, {"type": "heartbeat-loss", "at_s": "1m",
                                                                   "fraction": 0.1, "duration_s": "5s"}])
    doc["cluster"] = {"backend": backend}
    assert [f.type for f in parse_scenario(doc, "s.yaml").faults] == ["node-lost", "heartbeat-loss"]


# ----------------------------------------------------------------------------------------- refusals: faults


@pytest.mark.parametrize(("fault", "path", "message"), [
    ({"type": "node-lost", "at_s": "1m", "rate_per_gpu_hour": -1, "duration_s": "5m"}, "rate_per_gpu_hour",
     "expected a rate >= 0 faults per GPU-hour, got -1"),
    ({"type": "node-lost", "at_s": "1m", "rate_per_gpu_hour": -0.5, "duration_s": "5m"}, "rate_per_gpu_hour",
     "expected a rate >= 0 faults per GPU-hour, got -0.5"),
    ({"type": "node-lost", "at_s": "1m", "rate_per_gpu_hour": "often", "duration_s": "5m"}, "rate_per_gpu_hour",
     "expected a rate >= 0 faults per GPU-hour, got str 'often'"),
    ({"type": "node-lost", "at_s": "1m", "rate_per_gpu_hour": 1}, "duration_s",
     "is required for a node-lost fault (the span of the fault process)"),
    ({"type": "pod-failures", "at_s": "1m", "rate_per_gpu_hour": 1}, "duration_s",
     "is required for a pod-failures fault (the span of the fault process)"),
    ({"type": "pod-failures", "at_s": "1m", "rate_per_gpu_hour": 1, "duration_s": "5m", "fraction": 0.1}, "fraction",
     "does not apply to a pod-failures process (rate_per_gpu_hour): each firing fails count pods (default 1); "
     "remove it"),
    ({"type": "pod-failures", "at_s": "1m", "fraction": 0.1, "count": 2}, "count",
     "expected count or fraction, not both (a pod-failures fault hits count nodes or pods, or a fraction of them)"),
    ({"type": "node-drain", "at_s": "1m", "fraction": 0.1, "count": 2}, "count",
     "expected count or fraction, not both (a node-drain fault hits count nodes or pods, or a fraction of them)"),
    ({"type": "node-lost", "at_s": "1m", "count": 0}, "count", "expected an integer >= 1, got 0"),
    ({"type": "node-drain", "at_s": "1m", "delete_after_s": "1m"}, "delete_after_s",
     "does not apply to a node-drain fault; remove it"),
    ({"type": "node-lost", "at_s": "1m", "delete_after_s": "0s"}, "delete_after_s",
     "expected a duration >= 0.001s, got 0s"),
    ({"type": "node-lost", "at_s": "1m", "duration_s": "30s"}, "duration_s",
     "does not apply to a single node-lost fault (its nodes stay out until repair_after_s; with rate_per_gpu_hour "
     "it is the span of the fault process); remove it"),
    ({"type": "node-lost", "at_s": "1m", "component": "etcd"}, "component",
     "does not apply to a node-lost fault; remove it"),
    ({"type": "node-drain", "at_s": "1m", "job": "x"}, "job", "does not apply to a node-drain fault; remove it"),
    ({"type": "node-drain", "at_s": "1m", "replicas": 1}, "replicas", "does not apply to a node-drain fault; remove it"),
    ({"type": "pod-failures", "at_s": "1m", "fraction": 0.1, "duration_s": "5s", "repair_after_s": "1m"},
     "repair_after_s", "does not apply to a pod-failures fault; remove it"),
    ({"type": "pod-failures", "at_s": "1m", "fraction": 0.1, "duration_s": "5s", "delete_after_s": "1m"},
     "delete_after_s", "does not apply to a pod-failures fault; remove it"),
    ({"type": "heartbeat-loss", "at_s": "1m", "fraction": 0.1, "duration_s": "5s", "rate_per_gpu_hour": 1},
     "rate_per_gpu_hour", "does not apply to a heartbeat-loss fault; remove it"),
    ({"type": "heartbeat-loss", "at_s": "1m", "fraction": 0.1, "duration_s": "5s", "count": 1},
     "count", "does not apply to a heartbeat-loss fault; remove it"),
    ({"type": "component-kill", "at_s": "1m", "component": "kube-scheduler", "rate_per_gpu_hour": 1},
     "rate_per_gpu_hour", "does not apply to a component-kill fault; remove it"),
    ({"type": "component-kill", "at_s": "1m", "component": "kube-scheduler", "workload": "train"},
     "workload", "does not apply to a component-kill fault; remove it"),
    ({"type": "component-stall", "at_s": "1m", "component": "etcd", "duration_s": "5s", "repair_after_s": "1m"},
     "repair_after_s", "does not apply to a component-stall fault; remove it"),
    ({"type": "component-restart", "at_s": "1m", "component": "etcd", "count": 1},
     "count", "does not apply to a component-restart fault; remove it"),
])
def test_a_bad_fault_is_refused_with_its_field(fault: dict[str, Any], path: str, message: str) -> None:
    assert _problems(_scenario(faults=[fault])) == {f"faults[0].{path}": message}


@pytest.mark.parametrize("extra", [{"delete_after_s": "1m"}, {"rate_per_gpu_hour": 1}, {"workload": "train"},
                                   {"count": 1}, {"repair_after_s": "1m"}])
def test_distill_faults_take_none_of_the_node_fields(extra: dict[str, Any]) -> None:
    (name,) = extra
    with pytest.raises(SpecError) as info:
        validate(FaultSpec, {"type": "teacher-kill", "at_s": 1, "job": "d", **extra}, "f.yaml")
    assert [(e.path, e.message) for e in info.value.errors] == [(name, "does not apply to a teacher-kill fault; "
                                                                       "remove it")]


def test_a_fault_aimed_at_a_workload_the_scenario_does_not_have_is_refused() -> None:
    problems = _problems(_scenario(faults=[{"type": "node-lost", "at_s": "1m", "workload": "serve"},
                                           {"type": "pod-failures", "at_s": "1m", "rate_per_gpu_hour": 1,
                                            "duration_s": "1m", "workload": "train"}]))
    assert problems == {"faults[0].workload": "expected one of workloads (train), got 'serve'"}


def test_a_pod_failures_fault_aimed_once_takes_a_count_and_no_duration() -> None:
    problems = _problems(_scenario(faults=[{"type": "pod-failures", "at_s": "1m", "duration_s": "5s", "count": 3}]))
    assert problems == {
        "faults[0].duration_s": "does not apply to a pod-failures fault aimed at a workload or a count (its pods "
                                "crash at once; with rate_per_gpu_hour it is the span of the fault process); remove it"}
    (f,) = parse_scenario(_scenario(faults=[{"type": "pod-failures", "at_s": "1m", "count": 1, "workload": "train"}]),
                          "s.yaml").faults
    assert (f.count, f.workload, f.duration_s, f.is_process) == (1, "train", None, False)


# ----------------------------------------------------------------------------------------- checkpoint_interval


def test_a_checkpoint_interval_without_a_gang_is_refused() -> None:
    w = {k: v for k, v in TRAIN.items() if k != "gang"}
    assert _workload_problems(w) == {"workloads[0].checkpoint_interval": (
        "the restart model is a gang's: set gang (a member that fails or is deleted restarts the whole gang from "
        "its last checkpoint)")}


@pytest.mark.parametrize(("run", "interval", "longest"), [
    ("1m", "2m", "60s"),
    ({"dist": "uniform", "min": "1m", "max": "90s"}, "2m", "90s"),
    ({"dist": "exponential", "mean": "1m", "max": "100s"}, "2m", "100s"),
])
def test_a_checkpoint_interval_longer_than_the_job_is_refused(run: Any, interval: str, longest: str) -> None:
    assert _workload_problems({**TRAIN, "run_duration": run, "checkpoint_interval": interval}) == {
        "workloads[0].checkpoint_interval": f"expected at most the longest run the workload's run_duration can draw "
                                            f"({longest}), got 120s"}


@pytest.mark.parametrize("run", ["2m", {"dist": "uniform", "min": "1m", "max": "2m"},
                                 {"dist": "exponential", "mean": "30s"},  # no finite max: not refused
                                 {"dist": "lognormal", "median": "30s", "sigma": 1}])
def test_a_checkpoint_interval_the_job_can_reach_is_accepted(run: Any) -> None:
    (w,) = _load({**TRAIN, "run_duration": run}).workloads
    assert w.checkpoint_interval == 120.0


def test_a_checkpoint_interval_on_a_deployment_is_refused() -> None:
    w = {"name": "serve", "kind": "Deployment", "run_duration": "forever", "checkpoint_interval": "1m",
         "roles": [{"name": "r", "resources": {"cpu": "1"}}]}
    assert _workload_problems(w) == {"workloads[0].checkpoint_interval": (
        "Deployment pods run forever; a checkpoint interval applies to kinds with a run (Job, Pod, JobSet)")}


def test_several_pods_per_instance_need_same_duration() -> None:
    assert _workload_problems({**TRAIN, "same_duration": False}) == {"workloads[0].same_duration": (
        "expected true with checkpoint_interval and 2 pods per instance (all members do the same work and restart "
        "from one checkpoint), got false")}
    one = {**TRAIN, "same_duration": False, "roles": [{"name": "w", "resources": {"cpu": "8"}}]}
    assert _load(one).workloads[0].checkpoint_interval == 120.0  # one pod: nothing to keep together


@pytest.mark.parametrize(("value", "message"), [("0s", "expected a duration > 0, got 0s"),
                                                ("soon", "expected a Go duration")])
def test_a_checkpoint_interval_is_a_positive_duration(value: str, message: str) -> None:
    problems = _workload_problems({**TRAIN, "checkpoint_interval": value})
    assert list(problems) == ["workloads[0].checkpoint_interval"]
    assert problems["workloads[0].checkpoint_interval"].startswith(message)


def test_the_scenario_names_a_bad_checkpoint_interval_with_its_path() -> None:
    w = {k: v for k, v in TRAIN.items() if k != "gang"}
    problems = _problems(_scenario(workloads=[w], faults=[]))
    assert problems == {"workloads[0].checkpoint_interval": (
        "the restart model is a gang's: set gang (a member that fails or is deleted restarts the whole gang from "
        "its last checkpoint)")}


# ----------------------------------------------------------------------------------------- rendering


def test_every_pod_carries_the_checkpoint_interval_in_seconds() -> None:
    spec = _load({**TRAIN, "roles": [*TRAIN["roles"], {"name": "leader", "resources": {"cpu": "1"}}]})
    subs = WorkloadMix(spec, "r1").next_instance()
    templates = [s.body["spec"]["template"] for s in subs if s.kind == "Job"]
    assert len(templates) == 2
    for pod in templates:
        ann = pod["metadata"]["annotations"]
        assert ann[ANN_CHECKPOINT] == "120" and ann[ANN_RUN] == "10m0s"


def test_bare_gang_pods_and_jobsets_carry_it_too() -> None:
    pods = WorkloadMix(_load({**TRAIN, "kind": "Pod", "roles": [{"name": "w", "resources": {"cpu": "1"}}]}),
                       "r1").next_instance()
    assert [p.body["metadata"]["annotations"][ANN_CHECKPOINT] for p in pods if p.kind == "Pod"] == ["120"]
    (js,) = [s for s in WorkloadMix(_load({**TRAIN, "kind": "JobSet", "checkpoint_interval": 90.5}),
                                    "r1").next_instance() if s.kind == "JobSet"]
    pod = js.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"][ANN_CHECKPOINT] == "90.5"


def test_without_a_checkpoint_interval_nothing_is_written() -> None:
    w = {k: v for k, v in TRAIN.items() if k != "checkpoint_interval"}
    (sub,) = [s for s in WorkloadMix(_load(w), "r1").next_instance() if s.kind == "Job"]
    assert ANN_CHECKPOINT not in sub.body["spec"]["template"]["metadata"]["annotations"]
    assert "checkpoint_interval" not in _load(w).to_doc()["workloads"][0]


def test_the_spec_round_trips_with_its_checkpoint_interval() -> None:
    spec = _load({**TRAIN, "checkpoint_interval": 90.5})
    assert spec.to_doc()["workloads"][0]["checkpoint_interval"] == "1m30.5s"
    assert _load(spec.to_doc()["workloads"][0]).workloads == spec.workloads


@pytest.mark.parametrize(("seconds", "text"), [(60.0, "60"), (90.5, "90.5"), (120.0, "120"), (0.25, "0.25"),
                                               (3600.0004, "3600"), (1234567.0, "1234567")])
def test_annotation_seconds_is_a_plain_decimal(seconds: float, text: str) -> None:
    assert annotation_seconds(seconds) == text


def test_the_annotation_is_the_same_for_loadgen_and_hollow() -> None:
    """hollow may not import loadgen, so it writes the name too: both must say the same."""
    assert stages.ANN_CHECKPOINT == ANN_CHECKPOINT == "hollowscale.io/checkpoint-interval"


# ----------------------------------------------------------------------------------------- upper_bound


@pytest.mark.parametrize(("doc", "bound"), [
    ("10m", 600.0), ({"dist": "uniform", "min": "1m", "max": "2m"}, 120.0),
    ({"dist": "normal", "mean": "1m", "stddev": "10s", "max": "80s"}, 80.0),
    ({"dist": "exponential", "mean": "1m"}, math.inf), ("forever", math.inf),
])
def test_a_distribution_says_its_largest_draw(doc: Any, bound: float) -> None:
    assert parse_dist(doc).upper_bound() == bound
    assert DurationDist.fixed(5.0).upper_bound() == 5.0


# ----------------------------------------------------------------------------------- Kueue's waitForPodsReady


def test_kueue_pods_ready_renders_kueues_configuration_and_a_variant_may_set_its_own() -> None:
    from hollowscale.cluster.kueue import KueueLayout, KueuePorts, render_config
    from hollowscale.scenario.batch import VariantSpec

    ready = {"timeout": "2m", "recovery_timeout": "5s", "backoff_base_s": 5, "backoff_max_s": 30, "backoff_limit": 3}
    sc = parse_scenario(_scenario(variants=[{"name": "plain", "kueue": True},
                                            {"name": "requeue", "kueue": True, "kueue_pods_ready": ready}]), "s.yaml")
    assert sc.cluster.kueue_pods_ready is None
    plain, requeue = (sc.with_variant(VariantSpec(**v.model_dump())) for v in sc.variants)
    assert plain.cluster.kueue_pods_ready is None
    doc = requeue.cluster.kueue_pods_ready.to_kueue()
    assert doc == {"timeout": "120s", "blockAdmission": False, "recoveryTimeout": "5s",
                   "requeuingStrategy": {"backoffBaseSeconds": 5, "backoffMaxSeconds": 30, "backoffLimitCount": 3}}
    config = render_config(KueueLayout(Path("/k")), KueuePorts(1, 2, 3), wait_for_pods_ready=doc)
    assert config["waitForPodsReady"] == doc


def test_kueue_pods_ready_needs_kueue_and_sane_values() -> None:
    ready = {"timeout": "1m"}
    assert _problems(_scenario(cluster={"backend": "local", "kueue_pods_ready": ready})) == {
        "cluster.kueue_pods_ready": "configures Kueue, which this scenario does not run: set cluster.kueue or a "
                                    "variant's kueue"}
    assert _problems(_scenario(variants=[{"name": "v", "kueue_pods_ready": ready}])) == {
        "variants[0].kueue_pods_ready": "configures Kueue, which this variant does not run: set its kueue: true"}
    assert _problems(_scenario(variants=[{"name": "v", "kueue": True, "kueue_pods_ready": {"timeout": "0s"}}])) == {
        "variants[0].kueue_pods_ready.timeout": "expected a duration > 0s, got 0s"}
    assert _problems(_scenario(variants=[{"name": "v", "kueue": True,
                                          "kueue_pods_ready": {"backoff_base_s": 0}}])) == {
        "variants[0].kueue_pods_ready.backoff_base_s": "expected an integer >= 1, got 0"}


def test_a_running_cluster_with_another_pods_ready_is_not_reused(tmp_path: Path) -> None:
    from hollowscale.cluster.local import ClusterError, LocalCluster, _State

    wanted = {"timeout": "120s", "blockAdmission": False, "recoveryTimeout": "5s"}
    local = LocalCluster(tmp_path / "c", kueue=True, kueue_pods_ready=wanted)
    assert local.installed[0].wait_for_pods_ready == wanted  # type: ignore[attr-defined]
    running = _State("default", {}, features={"kueue": {"wait_for_pods_ready": {"timeout": "5m",
                                                                                "blockAdmission": False}}})
    with pytest.raises(ClusterError, match="runs Kueue with waitForPodsReady"):
        local._check_features(running)
    local._check_features(_State("default", {}, features={"kueue": {"wait_for_pods_ready": wanted}}))
