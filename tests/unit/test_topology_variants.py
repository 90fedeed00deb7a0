"""Workloads that ask for topology, and the variants that render it (issue 35, parts 2 and 5).

Pure rendering and validation, no server: the level names of the pools resolved to label keys, each
variant's rendering (none, affinity, Kueue's TAS annotations, the in-tree PodGroup constraint), Kueue's
Topology and TAS flavors, and one worded problem for each thing that cannot work.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.batch.objects import kueue_objects, object_path
from hollowscale.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from loadgen.workloads import (
    ANN_KUEUE_PREFERRED,
    ANN_KUEUE_REQUIRED,
    ANN_KUEUE_SLICE,
    ANN_KUEUE_SLICE_SIZE,
    LABEL_KUEUE_QUEUE,
    Submission,
    WorkloadMix,
)

ROOT = Path(__file__).resolve().parents[2]
RACK = "hollowscale.io/topology-rack"
BLOCK = "hollowscale.io/topology-block"
HOST = "kubernetes.io/hostname"
KUEUE_ANNOTATIONS = (ANN_KUEUE_REQUIRED, ANN_KUEUE_PREFERRED, ANN_KUEUE_SLICE, ANN_KUEUE_SLICE_SIZE)

GPU_ROLE: dict[str, Any] = {
    "name": "worker", "replicas": 8, "resources": {"cpu": "8", "nvidia.com/gpu": "4"},
    "node_selector": {"nvidia.com/gpu.product": "B200"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def _doc(**over: Any) -> dict[str, Any]:
    """A small topology scenario: a dgx-blocks pool (block > rack > host), one 8-pod gang asking for a rack."""
    doc: dict[str, Any] = {
        "name": "topo", "cluster": {"backend": "local"},
        "pools": [{"name": "dgx", "count": 256, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                   "labels": {"nvidia.com/gpu.product": "B200"}, "topology": {"shape": "dgx-blocks"}},
                  {"name": "cpu", "count": 4, "resources": {"cpu": "64", "memory": "256Gi"},
                   "labels": {"hollowscale.io/pool": "cpu"}}],
        "workloads": [{"name": "train", "run_duration": "30s", "gang": {"min_members": "all"}, "queued": True,
                       "topology": {"level": "rack", "slice_level": "host", "slice_size": 4},
                       "roles": [copy.deepcopy(GPU_ROLE)]}],
        "tenants": [{"name": "ml", "quotas": {"dgx": {"nvidia.com/gpu": 2048}}}],
        "arrival": {"curve": "constant", "rate": 1, "duration_s": "10s", "seed": 3},
        "variants": [{"name": "none", "gang_scheduling": True, "topology": "none"},
                     {"name": "affinity"},
                     {"name": "required", "kueue": True, "topology": "kueue-required"},
                     {"name": "preferred", "kueue": True, "topology": "kueue-preferred"},
                     {"name": "slice", "kueue": True, "topology": "kueue-slice"},
                     {"name": "intree", "gang_scheduling": True, "topology": "intree"}],
    }
    doc.update(over)
    return doc


def _variant(sc: Scenario, name: str) -> Scenario:
    return sc.with_variant(next(v for v in sc.variants if v.name == name))


def _instance(sc: Scenario) -> list[Submission]:
    return WorkloadMix(sc.load, "run-1").next_instance()


def _job(subs: list[Submission]) -> dict[str, Any]:
    return next(s.body for s in subs if s.kind == "Job")


def _problems(doc: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, "s.yaml")
    return str(err.value)


# ------------------------------------------------------------------------------------------------ rendering
def test_level_names_resolve_to_the_pools_label_keys() -> None:
    sc = parse_scenario(_doc(), "s.yaml")
    assert sc.load.topology_keys == {"block": BLOCK, "rack": RACK, "host": HOST}
    assert sc.load.to_doc()["topology_keys"] == {"block": BLOCK, "rack": RACK, "host": HOST}
    assert "topology" not in sc.load.to_doc()  # affinity, the default, is not written
    assert _variant(sc, "required").load.to_doc()["topology"] == "kueue-required"


def test_each_variant_renders_the_workload_topology_its_way() -> None:
    sc = parse_scenario(_doc(), "s.yaml")
    # none: in-tree gangs, no topology anywhere
    subs = _instance(_variant(sc, "none"))
    assert [s.kind for s in subs] == ["Workload", "PodGroup", "Job"]
    assert all("schedulingConstraints" not in s.body["spec"] for s in subs[:2])
    tmpl = _job(subs)["spec"]["template"]
    assert "affinity" not in tmpl["spec"] and not set(KUEUE_ANNOTATIONS) & set(tmpl["metadata"]["annotations"])
    # affinity (no gang scheduling): required pod affinity on the rack's label, as before
    tmpl = _job(_instance(_variant(sc, "affinity")))["spec"]["template"]
    term = tmpl["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == RACK
    # Kueue: a suspended queued Job whose pod template asks Kueue's TAS for the rack's label
    job = _job(_instance(_variant(sc, "required")))
    ann = job["spec"]["template"]["metadata"]["annotations"]
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"][LABEL_KUEUE_QUEUE] == "ml-queue"
    assert {k: ann[k] for k in KUEUE_ANNOTATIONS if k in ann} == {ANN_KUEUE_REQUIRED: RACK}
    assert "affinity" not in job["spec"]["template"]["spec"]
    ann = _job(_instance(_variant(sc, "preferred")))["spec"]["template"]["metadata"]["annotations"]
    assert {k: ann[k] for k in KUEUE_ANNOTATIONS if k in ann} == {ANN_KUEUE_PREFERRED: RACK}
    # slices of 4 pods per host inside the required rack (the outer level differs from the slice level)
    ann = _job(_instance(_variant(sc, "slice")))["spec"]["template"]["metadata"]["annotations"]
    assert {k: ann[k] for k in KUEUE_ANNOTATIONS if k in ann} == {
        ANN_KUEUE_REQUIRED: RACK, ANN_KUEUE_SLICE: HOST, ANN_KUEUE_SLICE_SIZE: "4"}
    # in-tree: the PodGroup (and its Workload template) carry the rack's key, the pods no affinity
    subs = _instance(_variant(sc, "intree"))
    assert subs[1].body["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert subs[0].body["spec"]["podGroupTemplates"][0]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert "affinity" not in _job(subs)["spec"]["template"]["spec"]


def test_slice_only_and_preferred_outer_level() -> None:
    doc = _doc()
    doc["workloads"][0]["topology"] = {"level": "rack", "mode": "prefer", "slice_level": "rack", "slice_size": 8}
    sc = parse_scenario(doc, "s.yaml")
    ann = _job(_instance(_variant(sc, "slice")))["spec"]["template"]["metadata"]["annotations"]
    # one level for both: a slice-only request (Kueue's unconstrained outer level)
    assert {k: ann[k] for k in KUEUE_ANNOTATIONS if k in ann} == {ANN_KUEUE_SLICE: RACK, ANN_KUEUE_SLICE_SIZE: "8"}
    doc["workloads"][0]["topology"] = {"level": "block", "mode": "prefer", "slice_level": "rack", "slice_size": 8}
    ann = _job(_instance(_variant(parse_scenario(doc, "s.yaml"), "slice")))["spec"]["template"]["metadata"][
        "annotations"]
    assert {k: ann[k] for k in KUEUE_ANNOTATIONS if k in ann} == {
        ANN_KUEUE_PREFERRED: BLOCK, ANN_KUEUE_SLICE: RACK, ANN_KUEUE_SLICE_SIZE: "8"}
    # a workload without slices in the slice variant asks for its level by its mode
    doc["workloads"][0]["topology"] = {"level": "block"}
    ann = _job(_instance(_variant(parse_scenario(doc, "s.yaml"), "slice")))["spec"]["template"]["metadata"][
        "annotations"]
    assert {k: ann[k] for k in KUEUE_ANNOTATIONS if k in ann} == {ANN_KUEUE_REQUIRED: BLOCK}


# ------------------------------------------------------------------------------------------------ Kueue objects
def test_kueue_variants_make_a_topology_and_tas_flavors() -> None:
    doc = _doc()
    doc["pools"].append({"name": "dgx2", "count": 256, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                         "labels": {"nvidia.com/gpu.product": "B200", "hollowscale.io/pool": "dgx2"},
                         "topology": {"shape": "dgx-blocks"}})
    doc["pools"].append({"name": "nvl", "count": 72, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "4"},
                         "labels": {"nvidia.com/gpu.product": "GB200"}, "topology": {"shape": "gb200-nvl72"}})
    sc = parse_scenario(doc, "s.yaml")
    objs = kueue_objects(_variant(sc, "required"), "run-1")
    topologies = [o for o in objs if o["kind"] == "Topology"]
    # one per distinct level list, coarse to fine, hostname last; before every flavor
    assert [(t["metadata"]["name"], [lv["nodeLabel"] for lv in t["spec"]["levels"]]) for t in topologies] == [
        ("dgx-topology", [BLOCK, RACK, HOST]), ("nvl-topology", [RACK, HOST])]
    assert [o["kind"] for o in objs[:2]] == ["Topology", "Topology"]
    flavors = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "ResourceFlavor"}
    assert flavors["dgx"]["topologyName"] == flavors["dgx2"]["topologyName"] == "dgx-topology"
    assert flavors["nvl"]["topologyName"] == "nvl-topology"
    assert "topologyName" not in flavors["cpu"]
    assert all(f["nodeLabels"] for f in flavors.values())  # Kueue: a TAS flavor needs nodeLabels
    assert all(o["metadata"]["labels"] == {"hollowscale.io/run": "run-1"} for o in topologies)
    assert object_path(topologies[0], name=True) == "/apis/kueue.x-k8s.io/v1beta2/topologies/dgx-topology"
    # Kueue without a TAS variant: flavors as before, no Topology
    plain = dict(_doc(), variants=[{"name": "queues", "kueue": True}])
    objs = kueue_objects(_variant(parse_scenario(plain, "s.yaml"), "queues"), "run-1")
    assert "Topology" not in [o["kind"] for o in objs]
    assert all("topologyName" not in o["spec"] for o in objs if o["kind"] == "ResourceFlavor")


# ------------------------------------------------------------------------------------------------ problems
def test_a_level_the_landing_pools_lack_is_named() -> None:
    doc = _doc()
    doc["workloads"][0]["topology"] = {"level": "zone"}
    assert ("workloads[0].topology.level: expected a level of the pools it can land on (dgx: block, rack, host), "
            "got 'zone'") in _problems(doc)
    # a workload that lands on the CPU pool only: its pools have no levels at all
    doc = _doc()
    doc["workloads"][0]["roles"] = [{"name": "w", "replicas": 8, "resources": {"cpu": "1"},
                                     "node_selector": {"hollowscale.io/pool": "cpu"}}]
    doc["workloads"][0]["topology"] = {"level": "rack"}
    doc["variants"] = [{"name": "affinity"}]
    assert ("workloads[0].topology: the pools it can land on (cpu) have no topology levels: expected pools with "
            "topology levels (levels, shape, zones or racks_per_zone) or no topology") in _problems(doc)


def test_a_slice_size_must_divide_the_gang() -> None:
    doc = _doc()
    doc["workloads"][0]["topology"] = {"level": "rack", "slice_level": "host", "slice_size": 3}
    assert ("workloads[0].topology.slice_size: expected a divisor of the gang's member count and of each role's "
            "replicas (8), got 3") in _problems(doc)
    doc["workloads"][0]["topology"] = {"level": "rack", "slice_size": 4}
    assert "workloads[0].topology.slice_level: expected slice_level together with slice_size" in _problems(doc)


def test_variants_need_what_they_render_with() -> None:
    doc = _doc(variants=[{"name": "tas", "topology": "kueue-required"},
                         {"name": "tree", "kueue": True, "topology": "intree"}])
    text = _problems(doc)
    assert "variants[0].topology: topology kueue-required is Kueue's topology-aware scheduling: expected kueue: true" \
        in text
    assert "variants[1].topology: topology intree is the PodGroup's topology constraint: expected gang_scheduling: " \
        "true" in text
    doc = _doc()
    del doc["workloads"][0]["gang"]
    doc["workloads"][0]["queued"] = False
    text = _problems(doc)
    assert "workloads[0].gang: a variant renders topology intree (the PodGroup's topology constraint): expected a gang" \
        in text
    assert "workloads[0].queued: variant required places it with Kueue's topology-aware scheduling (Kueue admits " \
        "queued Jobs): expected queued: true" in text
    doc = _doc(variants=[{"name": "bad", "topology": "anywhere"}])
    assert "variants[0].topology: expected one of none, affinity, kueue-required, kueue-preferred, kueue-slice, " \
        "intree, got 'anywhere'" in _problems(doc)


def test_kueue_variants_need_levels_not_zones_and_one_label_per_level_name() -> None:
    doc = _doc()
    doc["pools"][0]["topology"] = {"zones": ["a", "b"], "racks_per_zone": 2}
    doc["workloads"][0]["topology"] = {"level": "rack"}
    assert ("workloads[0].topology: variant required makes a Kueue Topology of the pools' levels: expected topology "
            "levels or a shape on every pool it can land on (dgx), not zones/racks_per_zone") in _problems(doc)
    doc = _doc()
    doc["pools"].append({"name": "odd", "count": 4, "resources": {"cpu": "8", "memory": "32Gi"},
                         "topology": {"levels": [{"name": "rack", "label": "example.com/rack", "fanout": 2},
                                                 {"name": "host", "label": HOST}]}})
    assert ("pools[2].topology: level 'rack' is label example.com/rack here and hollowscale.io/topology-rack in pool "
            "dgx: expected one label per level name (workloads name levels)") in _problems(doc)


# ------------------------------------------------------------------------------------------------ the scenario
def test_topology_gangs_scenario_validates_and_renders_each_variant() -> None:
    sc = load_scenario(ROOT / "scenarios" / "topology-gangs.yaml")
    assert [v.name for v in sc.variants] == ["default", "kueue-tas-required", "kueue-tas-preferred",
                                             "kueue-tas-slice", "intree-tas"]
    doc = yaml.safe_load((ROOT / "scenarios" / "topology-gangs.yaml").read_text())
    sizes = sorted(sum(r["replicas"] for r in w["roles"]) for w in doc["workloads"])
    assert sizes[0] >= 8 and all(w["gang"]["min_members"] == "all" for w in doc["workloads"])
    seen: dict[str, set[str]] = {}
    for v in sc.variants:
        run = sc.with_variant(v)
        mix = WorkloadMix(run.load, "run-1")
        kinds: set[str] = set()
        for _ in range(6):
            for s in mix.next_instance():
                kinds.add(s.kind)
                if s.kind == "Job":
                    kinds |= set(s.body["spec"]["template"]["metadata"]["annotations"]) & set(KUEUE_ANNOTATIONS)
                if s.kind == "PodGroup" and "schedulingConstraints" in s.body["spec"]:
                    kinds.add("constraint")
        seen[v.name] = kinds
    assert seen["default"] == {"Workload", "PodGroup", "Job"}
    assert seen["kueue-tas-required"] == {"Job", ANN_KUEUE_REQUIRED}
    assert seen["kueue-tas-preferred"] == {"Job", ANN_KUEUE_PREFERRED}
    assert seen["kueue-tas-slice"] == {"Job", ANN_KUEUE_SLICE, ANN_KUEUE_SLICE_SIZE}
    assert seen["intree-tas"] == {"Workload", "PodGroup", "Job", "constraint"}
