"""loadgen batch workloads: gangs, queues, topology, tenants and Volcano, as rendered objects and validation.

Pure rendering and validation, no server: a golden gang instance (in-tree Workload + PodGroup, suspended
queued Jobs), Volcano objects checked against Volcano's own CRD schemas (tests/fixtures/volcano, copied
from github.com/volcano-sh/volcano), the tenants' split of the arrivals, and the exact wording of bad input.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollow.nodebody import RACK_LABEL
from kubecore.schema import SpecError
from loadgen.spec import TOPOLOGY_KEYS, LoadSpec, parse_load_spec
from loadgen.workloads import (
    ANN_GANG_MIN,
    ANN_VOLCANO_GROUP,
    LABEL_GANG,
    LABEL_INSTANCE,
    LABEL_KUEUE_PRIORITY,
    LABEL_KUEUE_QUEUE,
    LABEL_RUN,
    Submission,
    WorkloadMix,
)

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "loadgen"
VOLCANO = ROOT / "tests" / "fixtures" / "volcano"

DISTILL: dict[str, Any] = {
    "name": "distill", "priority_class": "high", "run_duration": "60s",
    "roles": [
        {"name": "student", "resources": {"cpu": "8", "nvidia.com/gpu": "8"}},
        {"name": "teacher", "replicas": 2, "resources": {"cpu": "4", "nvidia.com/gpu": "1"}},
    ],
}


def _spec(workloads: list[dict[str, Any]] | None = None, **over: Any) -> LoadSpec:
    doc: dict[str, Any] = {
        "name": "batch", "namespace": "load",
        "workloads": workloads or [DISTILL],
        "arrival": {"curve": "constant", "rate": 1, "duration_s": "60s", "seed": 7},
    }
    doc.update(over)
    return parse_load_spec(doc, "spec.yaml")


def _errors(workloads: list[dict[str, Any]] | None = None, **over: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        _spec(workloads, **over)
    return [line.removeprefix("spec.yaml: ") for line in str(info.value).splitlines()]


def _w(**over: Any) -> dict[str, Any]:
    return {**DISTILL, **over}


TENANTS = [{"name": "team-a", "namespace": "team-a", "share": 3},
           {"name": "team-b", "namespace": "team-b", "queue": "b-queue"}]


def _golden(name: str, got: Any) -> None:
    path = GOLDEN / name
    text = json.dumps(got, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it)"


def _dump(subs: list[Submission]) -> list[dict[str, Any]]:
    return [{"request": s.request_name, "path": s.path, "body": s.body} for s in subs]


# ------------------------------------------------------------------------------------------------ in-tree gang


def test_gang_queued_topology_instance_is_golden() -> None:
    w = _w(gang={"min_members": "all"}, queued=True, kueue_priority_class="batch-high",
           topology={"level": "rack", "mode": "require"})
    spec = _spec([w], tenants=TENANTS, gang_scheduling=True, kueue=True)
    subs = WorkloadMix(spec, "run-1", stream="0").next_instance()
    assert [s.request_name for s in subs] == ["create Workload distill", "create PodGroup distill",
                                              "create Job distill/student", "create Job distill/teacher"]
    _golden("gang-queued-rack-instance.json", _dump(subs))
    wl, pg, student, teacher = (s.body for s in subs)
    group = pg["metadata"]["name"]
    assert wl["metadata"]["name"] == group and len(group) <= 63
    assert pg["spec"]["podGroupTemplateRef"]["workload"] == {"workloadName": group, "podGroupTemplateName": "members"}
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert pg["spec"]["schedulingConstraints"] == {"topology": [{"key": "hollowscale.io/rack"}]}
    for job in (student, teacher):
        assert job["spec"]["suspend"] is True
        assert job["metadata"]["labels"][LABEL_KUEUE_QUEUE] in ("team-a-queue", "b-queue")
        assert job["metadata"]["labels"][LABEL_KUEUE_PRIORITY] == "batch-high"
        assert job["metadata"]["labels"][LABEL_GANG] == group and job["metadata"]["annotations"] == {ANN_GANG_MIN: "3"}
        pod = job["spec"]["template"]
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": group}
        assert pod["metadata"]["labels"][LABEL_GANG] == group and pod["metadata"]["annotations"][ANN_GANG_MIN] == "3"
        assert "affinity" not in pod["spec"]  # the PodGroup's constraint does it
    # one tenant per instance: every object in its namespace, the Jobs with its queue
    (ns,) = {s.path.split("/namespaces/")[1].split("/")[0] for s in subs}
    assert {student["metadata"]["labels"][LABEL_KUEUE_QUEUE]} == {{"team-a": "team-a-queue", "team-b": "b-queue"}[ns]}


def test_rack_label_is_hollows() -> None:
    assert TOPOLOGY_KEYS == {"rack": RACK_LABEL, "zone": "topology.kubernetes.io/zone"}


def test_gang_of_n_and_group_names() -> None:
    spec = _spec([_w(gang={"min_members": 2})], gang_scheduling=True)
    mix = WorkloadMix(spec, "run-1", stream="0")
    first = mix.next_instance()
    assert first[1].body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert "schedulingConstraints" not in first[1].body["spec"]
    assert first[1].body["spec"]["priorityClassName"] == "high"
    names = {mix.next_instance()[0].body["metadata"]["name"] for _ in range(200)}
    assert len(names) == 200 and all(re.fullmatch(r"distill-0-\d+-[0-9a-f]{10}", n) for n in names)
    # the same instance in another run has another name (a leftover of an earlier run cannot collide)
    other = WorkloadMix(spec, "run-2", stream="0").next_instance()
    assert other[0].body["metadata"]["name"] != first[0].body["metadata"]["name"]
    # a long instance name is cut, the hash kept
    long_name = "w" * 63
    long = _spec([_w(name=long_name, gang={})], gang_scheduling=True)
    sub = WorkloadMix(long, "r", stream="x").next_instance()[0]
    assert len(sub.body["metadata"]["name"]) == 63 and sub.body["metadata"]["name"].startswith("w" * 52 + "-")


def test_gang_of_bare_pods() -> None:
    spec = _spec([_w(kind="Pod", roles=[{"name": "a"}, {"name": "b"}], gang={})], gang_scheduling=True)
    subs = WorkloadMix(spec, "r", stream="0").next_instance()
    assert [s.kind for s in subs] == ["Workload", "PodGroup", "Pod", "Pod"]
    group = subs[1].body["metadata"]["name"]
    for pod in (subs[2].body, subs[3].body):
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": group}
        assert pod["metadata"]["labels"][LABEL_GANG] == group and pod["metadata"]["annotations"][ANN_GANG_MIN] == "2"


def test_without_gang_scheduling_a_gang_is_labelled_and_topology_is_pod_affinity() -> None:
    spec = _spec([_w(gang={}, topology={"level": "zone"})])
    subs = WorkloadMix(spec, "run-1", stream="0").next_instance()
    assert [s.kind for s in subs] == ["Job", "Job"]  # no Workload, no PodGroup: the cluster has no gang gates
    group = subs[0].body["metadata"]["labels"][LABEL_GANG]
    instance = subs[0].body["metadata"]["labels"][LABEL_INSTANCE]
    for sub in subs:
        pod = sub.body["spec"]["template"]
        assert pod["metadata"]["labels"][LABEL_GANG] == group and "schedulingGroup" not in pod["spec"]
        assert pod["spec"]["affinity"] == {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {LABEL_RUN: "run-1", LABEL_INSTANCE: instance}},
             "topologyKey": "topology.kubernetes.io/zone"}]}}
        assert "suspend" not in sub.body["spec"]


def test_prefer_is_preferred_pod_affinity_also_with_a_podgroup() -> None:
    spec = _spec([_w(gang={}, topology={"level": "rack", "mode": "prefer"})], gang_scheduling=True)
    subs = WorkloadMix(spec, "r", stream="0").next_instance()
    assert "schedulingConstraints" not in subs[1].body["spec"]
    term = subs[2].body["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["weight"] == 100 and term["podAffinityTerm"]["topologyKey"] == RACK_LABEL


def test_queued_without_kueue_is_not_suspended() -> None:
    subs = WorkloadMix(_spec([_w(queued=True)], tenants=TENANTS), "r", stream="0").next_instance()
    for sub in subs:
        assert "suspend" not in sub.body["spec"] and LABEL_KUEUE_QUEUE not in sub.body["metadata"]["labels"]


def test_defaults_render_exactly_as_before() -> None:
    """No batch field set: the same draws and the same bodies as a spec of the fields that existed before."""
    spec = _spec()
    assert set(spec.to_doc()) == {"name", "namespace", "scheduler_name", "workloads", "arrival"}
    assert not {"gang", "queued", "kueue_priority_class", "topology"} & set(spec.to_doc()["workloads"][0])
    mix, ref = WorkloadMix(spec, "r", stream="0"), WorkloadMix(spec, "r", stream="0")
    for _ in range(20):
        got = mix.next_instance()
        w = ref.rng.choices(ref.workloads, weights=ref.weights)[0]
        ref.counter += 1
        want = [ref.build(w, role, f"{w.name}-0-{ref.counter}") for role in w.roles]
        assert [s.body for s in got] == [s.body for s in want]
        assert [s.request_name for s in got] == ["create Job distill/student", "create Job distill/teacher"]


def test_batch_fields_round_trip_through_json() -> None:
    spec = _spec([_w(gang={"min_members": 2}, queued=True, kueue_priority_class="p", topology={"level": "rack"})],
                 tenants=TENANTS, gang_scheduling=True, kueue=True)
    doc = json.loads(json.dumps(spec.to_doc()))
    assert parse_load_spec(doc, "again") == spec
    assert doc["tenants"][0] == {"name": "team-a", "namespace": "team-a", "share": 3.0}
    assert doc["workloads"][0]["topology"] == {"level": "rack", "mode": "require"}
    assert doc["gang_scheduling"] is True and doc["kueue"] is True and "volcano" not in doc


# ------------------------------------------------------------------------------------------------ tenants


def test_tenants_split_the_arrivals_by_share_deterministically() -> None:
    spec = _spec([_w(queued=True), _w(name="solo", roles=[{"name": "r"}], queued=True)], tenants=TENANTS, kueue=True)
    assert spec.namespaces() == ("team-a", "team-b")
    assert spec.tenant_fractions() == {"team-a": 0.75, "team-b": 0.25}
    mix = WorkloadMix(spec, "r", stream="0")
    seen: Counter[str] = Counter()
    for _ in range(4000):
        subs = mix.next_instance()
        namespaces = {s.path.split("/namespaces/")[1].split("/")[0] for s in subs}
        assert len(namespaces) == 1
        ns = namespaces.pop()
        seen[ns] += 1
        queue = {"team-a": "team-a-queue", "team-b": "b-queue"}[ns]
        assert all(s.body["metadata"]["labels"][LABEL_KUEUE_QUEUE] == queue for s in subs)
    assert abs(seen["team-a"] / 4000 - 0.75) < 0.03, seen
    a, b = WorkloadMix(spec, "r", stream="0"), WorkloadMix(spec, "r", stream="0")
    assert [[s.body for s in a.next_instance()] for _ in range(50)] == [[s.body for s in b.next_instance()]
                                                                        for _ in range(50)]


def test_with_namespace_refuses_a_spec_with_tenants() -> None:
    spec = _spec(tenants=TENANTS)
    with pytest.raises(SpecError) as info:
        spec.with_namespace("other")
    assert str(info.value) == ("--namespace: the load spec has tenants, each with its own namespace; "
                               "set their namespaces in the spec instead")
    assert _spec().with_namespace("other").namespaces() == ("other",)


# ------------------------------------------------------------------------------------------------ Volcano


@cache
def _crd_schema(name: str) -> dict[str, Any]:
    text = (VOLCANO / name).read_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(text, Loader=loader)
    version = next(v for v in crd["spec"]["versions"] if v["storage"])
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _check(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The structural OpenAPI v3 checks an apiserver applies to a CRD object (type, unknown fields,
    required, enum, bounds, patterns, lengths); every problem with its path."""
    out: list[str] = []
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            out.append(f"{path}: expected int or string, got {value!r}")
        return out
    if "anyOf" in schema and "type" not in schema:
        return out
    typ = schema.get("type")
    kinds = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool, "number": int | float}
    if typ is not None and (not isinstance(value, kinds[typ]) or (typ in ("integer", "number")
                                                                   and isinstance(value, bool))):
        return [f"{path}: expected {typ}, got {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{path}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            out += _check(item, schema.get("items", {}), f"{path}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties")
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{path}.{key}: required")
        for key, item in value.items():
            if props is not None and key in props:
                out += _check(item, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += _check(item, schema["additionalProperties"], f"{path}.{key}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}.{key}: unknown field")
    return out


def test_the_schema_check_finds_mistakes() -> None:
    schema = _crd_schema("batch.volcano.sh_jobs.yaml")
    bad = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "x"},
           "spec": {"minAvailable": -1, "queue": "Q", "minMembers": 1,
                    "tasks": [{"name": "a", "replicas": "1", "template": {"spec": {"containers": [{}]}}}]}}
    assert _check(bad, schema) == [
        ".spec.minAvailable: -1 < 0",
        ".spec.queue: 'Q' does not match ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        ".spec.minMembers: unknown field",
        ".spec.tasks[0].replicas: expected integer, got '1'",
        ".spec.tasks[0].template.spec.containers[0].name: required",
    ]


def test_volcano_job_per_instance_matches_volcanos_crd() -> None:
    w = _w(gang={"min_members": "all"}, queued=True, topology={"level": "rack"}, backoff_limit=2)
    spec = _spec([w, _w(name="partial", gang={"min_members": 2}), _w(name="loose")], tenants=TENANTS, volcano=True)
    mix = WorkloadMix(spec, "run-1", stream="0")
    schema = _crd_schema("batch.volcano.sh_jobs.yaml")
    by_workload: dict[str, dict[str, Any]] = {}
    for _ in range(60):
        subs = mix.next_instance()
        assert len(subs) == 1 and subs[0].kind == "VolcanoJob" and subs[0].role == ""
        assert subs[0].path.startswith("/apis/batch.volcano.sh/v1alpha1/namespaces/team-")
        assert _check(subs[0].body, schema) == []
        by_workload[subs[0].workload] = subs[0].body
    full, partial, loose = by_workload["distill"], by_workload["partial"], by_workload["loose"]
    spec_full = full["spec"]
    assert spec_full["schedulerName"] == "volcano" and spec_full["minAvailable"] == 3
    assert spec_full["queue"] in ("team-a-queue", "b-queue") and spec_full["priorityClassName"] == "high"
    assert spec_full["maxRetry"] == 2
    assert [(t["name"], t["replicas"], t["minAvailable"]) for t in spec_full["tasks"]] == [
        ("student", 1, 1), ("teacher", 2, 2)]
    group = full["metadata"]["name"]
    assert full["metadata"]["labels"][LABEL_GANG] == group and full["metadata"]["annotations"] == {ANN_GANG_MIN: "3"}
    pod = spec_full["tasks"][1]["template"]
    assert pod["spec"]["schedulerName"] == "volcano" and "schedulingGroup" not in pod["spec"]
    assert pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"] == RACK_LABEL
    assert pod["metadata"]["labels"][LABEL_GANG] == group and pod["metadata"]["annotations"][ANN_GANG_MIN] == "3"
    # pods are named <job>-<task>-<index>: a qualified name of at most 63 characters
    assert len(f"{group}-teacher-1") <= 63
    assert partial["spec"]["minAvailable"] == 2 and [t["minAvailable"] for t in partial["spec"]["tasks"]] == [0, 0]
    assert "queue" not in partial["spec"]  # not queued: Volcano's default queue
    assert loose["spec"]["minAvailable"] == 1 and LABEL_GANG not in loose["metadata"]["labels"]
    assert "annotations" not in loose["metadata"]


def test_volcano_job_names_leave_room_for_pod_names() -> None:
    role = "r" * 49  # 63 - 10 (hash) - 2 dashes - 2 index digits
    spec = _spec([{"name": "w" * 40, "roles": [{"name": role, "replicas": 10}]}], volcano=True)
    body = WorkloadMix(spec, "r", stream="0-7f3a2b1c4d50").next_instance()[0].body
    assert len(f"{body['metadata']['name']}-{role}-9") <= 63
    assert _check(body, _crd_schema("batch.volcano.sh_jobs.yaml")) == []


def test_volcano_gang_of_bare_pods_gets_a_podgroup() -> None:
    spec = _spec([_w(kind="Pod", roles=[{"name": "a"}, {"name": "b"}], gang={"min_members": 2}),
                  _w(name="svc", kind="Deployment", run_duration="forever", exit_codes={0: 1},
                     roles=[{"name": "web"}])], volcano=True, scheduler_name="volcano-custom")
    mix = WorkloadMix(spec, "r", stream="0")
    kinds: dict[str, list[Submission]] = {}
    for _ in range(20):
        subs = mix.next_instance()
        kinds[subs[0].workload] = subs
    pg, a, b = kinds["distill"]
    assert [pg.kind, a.kind, b.kind] == ["VolcanoPodGroup", "Pod", "Pod"]
    assert pg.path.startswith("/apis/scheduling.volcano.sh/v1beta1/namespaces/load/podgroups")
    assert _check(pg.body, _crd_schema("scheduling.volcano.sh_podgroups.yaml")) == []
    assert pg.body["spec"] == {"minMember": 2, "priorityClassName": "high"}
    for pod in (a.body, b.body):
        assert pod["metadata"]["annotations"][ANN_VOLCANO_GROUP] == pg.body["metadata"]["name"]
        assert pod["spec"]["schedulerName"] == "volcano-custom"  # a scheduler name given is kept
    (dep,) = kinds["svc"]
    assert dep.kind == "Deployment" and dep.body["spec"]["template"]["spec"]["schedulerName"] == "volcano-custom"


# ------------------------------------------------------------------------------------------------ bad input


def test_bad_workload_batch_fields_are_worded() -> None:
    assert _errors([_w(gang={"min_members": 4})]) == [
        "workloads[0].gang.min_members: expected at most 3 (the instance's pods: the sum of the roles' replicas), "
        "got 4"]
    assert _errors([_w(gang={"min_members": 0})]) == [
        "workloads[0].gang.min_members: expected 'all' or a whole number >= 1, got int 0"]
    assert _errors([_w(gang={"min_members": "most"})]) == [
        "workloads[0].gang.min_members: expected 'all' or a whole number >= 1, got str 'most'"]
    assert _errors([_w(gang={"min": 2})]) == [
        "workloads[0].gang.min: unknown key (expected one of: min_members)"]
    assert _errors([_w(kind="Deployment", run_duration="forever", gang={}, queued=True)]) == [
        "workloads[0].gang: only kinds Job and Pod can be gang-scheduled (a Deployment replaces its pods one by one)",
        "workloads[0].queued: only kind Job can be queued (a queue admits suspended Jobs; a Deployment would need "
        "Kueue's pod webhook)"]
    assert _errors([_w(kind="Pod", roles=[{"name": "a"}], queued=True)]) == [
        "workloads[0].queued: only kind Job can be queued (a queue admits suspended Jobs; a Pod would need "
        "Kueue's pod webhook)"]
    assert _errors([_w(queued="yes")]) == ["workloads[0].queued: expected true or false, got str 'yes'"]
    assert _errors([_w(kueue_priority_class="p")]) == [
        "workloads[0].kueue_priority_class: only valid with queued: true (Kueue reads it from the Jobs it queues)"]
    assert _errors([_w(queued=True, kueue_priority_class="p" * 64)]) == [
        "workloads[0].kueue_priority_class: expected at most 63 characters (the name is written as a label value), "
        "got 64"]
    assert _errors([_w(topology={"level": "rack", "mode": "always"})]) == [
        "workloads[0].topology.mode: expected one of prefer, require, got 'always'"]
    # a level is any DNS label; the load spec resolves it (its topology_keys, else rack and zone)
    assert _errors([_w(topology={"level": "row"})]) == [
        "workloads[0].topology.level: expected a level of the pools (rack, zone), got 'row'"]
    assert _errors([_w(topology={"level": "Row"})]) == [
        "workloads[0].topology.level: expected a lowercase DNS label (a-z, 0-9, '-', at most 63 characters), "
        "got str 'Row'"]
    assert _errors([_w(topology={"mode": "prefer"})]) == ["workloads[0].topology.level: is required"]
    assert _errors([_w(gang={}, roles=[{"name": "r", "replicas": 2, "completions": 4}])]) == [
        "workloads[0].roles[0].completions: a gang runs each pod once: expected completions unset or equal to "
        "replicas (2), got 4"]


def test_bad_load_batch_fields_are_worded() -> None:
    assert _errors(tenants=[{"name": "a", "namespace": "kube-system", "share": 0, "queue": "Q", "extra": 1}]) == [
        "tenants[0].namespace: expected a namespace of the run's own, got 'kube-system' (it holds the cluster's own "
        "objects: default, kube-node-lease, kube-public, kube-system are refused)",
        "tenants[0].share: expected a number > 0, got 0",
        "tenants[0].queue: expected a lowercase DNS subdomain (a-z, 0-9, '-', '.'), got str 'Q'",
        "tenants[0].extra: unknown key (expected one of: name, namespace, queue, share)"]
    assert _errors(tenants=[{"name": "a", "namespace": "x"}, {"name": "a", "namespace": "y"},
                            {"name": "b" * 60, "namespace": "z"}]) == [
        "tenants[1].name: duplicate tenant name 'a'",
        f"tenants[2].queue: the default queue name '{'b' * 60}-queue' is longer than 63 characters: give a queue"]
    assert _errors(volcano=True, kueue=True, gang_scheduling=True) == [
        "volcano: expected only one of volcano and kueue (Volcano queues its own Jobs)",
        "volcano: expected only one of volcano and gang_scheduling (Volcano schedules its pods itself, "
        "kube-scheduler's gang gates never see them)"]
    assert _errors([_w(queued=True)], kueue=True) == [
        "workloads[0].queued: kueue needs a LocalQueue to submit to: give tenants (each names its queue)"]
    assert _errors([_w(roles=[{"name": "r" * 51, "replicas": 3, "completions": 5}])], volcano=True) == [
        "workloads[0].roles[0].completions: a Volcano task runs its replicas once: expected completions unset or "
        "equal to replicas (3) with volcano: true, got 5",
        "workloads[0].roles[0].name: Volcano names pods <job>-<role>-<index> (at most 63 characters): expected a "
        "role name of at most 50 characters with volcano: true, got 51"]
    assert _errors(gang_scheduling="true") == ["gang_scheduling: expected true or false, got str 'true'"]


def test_same_duration_draws_once_per_instance() -> None:
    from loadgen.spec import parse_load_spec
    from loadgen.workloads import ANN_RUN, WorkloadMix

    doc = {"name": "s", "arrival": {"curve": "constant", "rate": 1, "duration_s": 10},
           "workloads": [{"name": "distill", "same_duration": True,
                          "run_duration": {"dist": "uniform", "min": "10s", "max": "90s"},
                          "roles": [{"name": "student", "resources": {"cpu": "1"}},
                                    {"name": "teacher", "replicas": 3, "resources": {"cpu": "1"}}]}]}
    mix = WorkloadMix(parse_load_spec(doc, "s.yaml"), run_id="r")
    durations = []
    for _ in range(5):
        subs = mix.next_instance()
        runs = {s.body["spec"]["template"]["metadata"]["annotations"][ANN_RUN] for s in subs}
        assert len(runs) == 1
        durations.append(runs.pop())
    assert len(set(durations)) > 1  # one draw per instance, not one for the whole run
    bad = dict(doc)
    bad["workloads"] = [dict(doc["workloads"][0], roles=[{"name": "a", "run_duration": "5s", "resources": {"cpu": "1"}}])]
    with pytest.raises(SpecError, match="same_duration: true draws one duration per instance"):
        parse_load_spec(bad, "s.yaml")
