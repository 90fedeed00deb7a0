"""Pool specs: the documented format, defaults, every error at once (file, field path, expectation),
the ``Pools`` type a scenario embeds, and the document the runner hands to agent processes."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hollow.pools import Pools, PoolsError, PoolSpec, load_pools, parse_pools, pools_to_doc
from hollow.stages import default_stages
from kubecore.schema import Spec, SpecError, validate

GOOD: dict[str, Any] = {
    "pools": [
        {
            "name": "v100",
            "count": 200,
            "resources": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "labels": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"},
            "taints": [],
        },
        {
            "name": "a100",
            "count": 3,
            "resources": {"cpu": 96, "memory": "1Ti", "ephemeral-storage": "2Ti", "nvidia.com/gpu": 8},
            "allocatable": {"cpu": "95500m"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            "role": "gpu",
            "pod_cidr": "10.128.0.0/16",
            "pod_cidr_mask_size": 26,
            "topology": {"region": "eu", "zones": ["z1", "z2"], "racks_per_zone": 2},
            "lifecycle": {
                "startup_delay": {"dist": "uniform", "min": "1s", "max": "3s"},
                "run_duration": "forever",
                "exit_code": 0,
                "failure_fraction": 0.1,
                "failure_exit_code": 137,
            },
        },
    ]
}


def test_documented_format_parses_with_defaults() -> None:
    v100, a100 = parse_pools(GOOD, "pools.yaml")
    assert v100.name == "v100" and v100.count == 200
    assert v100.capacity["nvidia.com/gpu"] == "8"
    assert v100.capacity["ephemeral-storage"] == "100Gi"  # default
    assert v100.allocatable == v100.capacity
    assert v100.labels == {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}
    assert v100.lifecycle.run_duration.forever and v100.lifecycle.startup_delay.value == 0
    assert v100.stages is None and v100.pod_cidr is None and v100.pod_cidr_mask == 24
    assert v100.first_ordinal == 0 and a100.first_ordinal == 200
    assert a100.allocatable["cpu"] == "95500m" and a100.capacity["cpu"] == "96"
    assert a100.allocatable["memory"] == "1Ti"  # every capacity key, overrides applied
    assert a100.taints[0].effect == "NoSchedule"
    assert a100.topology.zones == ("z1", "z2") and a100.topology.racks_per_zone == 2
    delay = a100.lifecycle.startup_delay
    assert (delay.kind, delay.minimum, delay.maximum) == ("uniform", 1.0, 3.0)
    assert math.isinf(a100.lifecycle.run_duration.value)
    assert a100.lifecycle.failure_exit_code == 137 and a100.lifecycle.failure_fraction == 0.1
    assert a100.pod_cidr == "10.128.0.0/16" and a100.pod_cidr_mask == 26
    assert a100.node_name(2) == "a100-2"


def test_bare_list_is_accepted_for_embedded_sections() -> None:
    assert [p.name for p in parse_pools(GOOD["pools"], "scenario.yaml")] == ["v100", "a100"]


def test_distribution_shapes() -> None:
    shapes = {
        "30s": ("fixed", 30.0),
        12.5: ("fixed", 12.5),
        "forever": ("fixed", math.inf),
        "{dist: normal, mean: 1m, stddev: 10s, min: 5s}": ("normal", 60.0),
        "{dist: lognormal, median: 30s, sigma: 0.5}": ("lognormal", 30.0),
        "{dist: exponential, mean: 20s, max: 90s}": ("exponential", 20.0),
    }
    for text, (kind, value) in shapes.items():
        raw = yaml.safe_load(text) if isinstance(text, str) and text.startswith("{") else text
        pool = parse_pools([{"name": "p", "count": 1, "resources": {"cpu": "1", "memory": "1Gi"},
                             "lifecycle": {"run_duration": raw}}], "f")[0]
        assert (pool.lifecycle.run_duration.kind, pool.lifecycle.run_duration.value) == (kind, value), text


def _bad(mutate: dict[str, Any], source: str = "my-pools.yaml") -> str:
    doc = copy.deepcopy(GOOD)
    target = doc["pools"][1]
    for key, value in mutate.items():
        if value is ...:
            del target[key]
        else:
            target[key] = value
    with pytest.raises(PoolsError) as info:
        parse_pools(doc, source)
    return str(info.value)


@pytest.mark.parametrize(
    ("mutate", "line"),
    [
        ({"resources": {"cpu": "64", "memory": "1Gi", "nvidia.com/gpu": "eight"}},
         "pools[1].resources.nvidia.com/gpu: expected a Kubernetes quantity such as '500m', '64Gi' or '8', got 'eight'"),
        ({"resources": {"cpu": "64"}}, "pools[1].resources.memory: is required"),
        ({"resources": {"cpu": "64", "memory": "1Gi", "nvidia.com/gpu": "0.5"}},
         "pools[1].resources.nvidia.com/gpu: expected a whole number for an extended resource, got '0.5'"),
        ({"resources": {"cpu": "64", "memory": "1Gi", "Bad Name": "1"}},
         "pools[1].resources.Bad Name: expected a resource name"),
        ({"count": -1}, "pools[1].count: expected an integer >= 0, got -1"),
        ({"count": True}, "pools[1].count: expected an integer, got boolean true"),
        ({"count": "3"}, "pools[1].count: expected an integer, got str '3'"),
        ({"count": 70_000}, "pools[1].count: expected an integer <= 65536, got 70000"),
        ({"count": ...}, "pools[1].count: is required"),
        ({"name": "Bad_Name"}, "pools[1].name: expected a lowercase DNS label"),
        ({"name": "x" * 49}, "pools[1].name: expected at most 48 characters"),
        ({"name": "v100"}, "pools[1].name: expected a name not used by an earlier pool (pools[0]), got 'v100'"),
        ({"gpu_count": 8}, "pools[1].gpu_count: unknown key (expected one of: allocatable, annotations, count,"),
        ({"podCIDR": "10.0.0.0/8"}, "pools[1].podCIDR: unknown key"),
        ({"taints": [{"key": "k", "effect": "Sometimes"}]},
         "pools[1].taints[0].effect: expected one of NoSchedule, PreferNoSchedule, NoExecute, got 'Sometimes'"),
        ({"taints": [{"key": "bad key", "effect": "NoSchedule"}]}, "pools[1].taints[0].key: expected a qualified name"),
        ({"labels": {"bad key!": "x"}}, "pools[1].labels.bad key!: expected a qualified name such as "
                                        "example.com/name (name <= 63 characters), got 'bad key!'"),
        ({"labels": {"ok": "x" * 64}}, "pools[1].labels.ok: expected a label value (<= 63 characters"),
        ({"labels": {"ok": 3}}, "pools[1].labels.ok: expected a string value (quote numbers), got int 3"),
        ({"annotations": {"example.com/n": 3}},
         "pools[1].annotations.example.com/n: expected a string value (quote numbers), got int 3"),
        ({"role": "gpu/x"}, "pools[1].role: expected a label name"),
        ({"pod_cidr": "10.0.0.0/30"}, "pools[1].pod_cidr: expected a network at least as large as /26"),
        ({"pod_cidr": "10.0.0.0/25"}, "pools[1].pod_cidr: expected room for 3 /26 subnets (it has 2)"),
        ({"pod_cidr": "not-a-net"}, "pools[1].pod_cidr: expected an IPv4 network such as 10.64.0.0/12"),
        ({"pod_cidr": ...}, "pools[1].pod_cidr: is required when pod_cidr_mask_size is not 24"),
        ({"pod_cidr_mask_size": 31}, "pools[1].pod_cidr_mask_size: expected an integer <= 30, got 31"),
        ({"allocatable": {"cpu": "100"}}, "pools[1].allocatable.cpu: expected at most the capacity 96, got '100'"),
        ({"allocatable": {"fpga": "1"}}, "pools[1].allocatable.fpga: expected a resource that is also in resources"),
        ({"lifecycle": {"run_duration": "ten minutes"}},
         "pools[1].lifecycle.run_duration: expected a Go duration such as '30s'"),
        ({"lifecycle": {"startup_delay": "forever"}}, "pools[1].lifecycle.startup_delay: expected a finite"),
        ({"lifecycle": {"run_duration": {"dist": "normal", "mean": "1m"}}},
         "pools[1].lifecycle.run_duration.stddev: is required for dist 'normal'"),
        ({"lifecycle": {"run_duration": {"mean": "1m", "jitter": "10s"}}},
         "pools[1].lifecycle.run_duration.mean: unknown key for dist 'fixed'"),
        ({"lifecycle": {"run_duration": {"dist": "uniform", "min": "1m", "max": "10s"}}},
         "pools[1].lifecycle.run_duration.max: expected max >= min (60s), got 10s"),
        ({"lifecycle": {"exit_code": 300}}, "pools[1].lifecycle.exit_code: expected an integer <= 255, got 300"),
        ({"lifecycle": {"failure_fraction": 2}}, "pools[1].lifecycle.failure_fraction: expected a number <= 1, got 2"),
        ({"lifecycle": {"failure_exit_code": 0}}, "pools[1].lifecycle.failure_exit_code: expected an integer >= 1"),
        ({"lifecycle": {"exitCode": 1}}, "pools[1].lifecycle.exitCode: unknown key (expected one of: exit_code,"),
        ({"topology": {"zones": "z1"}}, "pools[1].topology.zones: expected a list, got str 'z1'"),
        ({"topology": {"racks_per_zone": 2}},
         "pools[1].topology.zones: expected at least one zone when racks_per_zone is set"),
        ({"stages": 3}, "pools[1].stages: expected a list, got int 3"),
        ({"stages": [{"name": "x", "action": "go"}]},
         "pools[1].stages[0].action: expected one of start, finish, finalize, prepare, got 'go'"),
    ],
)
def test_errors_name_file_field_and_expectation(mutate: dict[str, Any], line: str) -> None:
    message = _bad(mutate)
    assert f"my-pools.yaml: {line}" in message, message


def test_every_error_is_reported_at_once() -> None:
    doc = copy.deepcopy(GOOD)
    doc["pools"][0]["count"] = "many"
    doc["pools"][0]["labels"] = {"bad key!": "x"}
    doc["pools"][1]["lifecycle"] = {"exit_code": 300, "failure_fraction": -1}
    doc["pools"][1]["allocatable"] = {"cpu": "100", "fpga": "1"}
    doc["pools"].append({"name": "v100", "count": 1, "resources": {"cpu": "1", "memory": "1Gi"}})
    with pytest.raises(SpecError) as info:
        parse_pools(doc, "f.yaml")
    paths = [e.path for e in info.value.errors]
    assert paths == ["pools[0].count", "pools[0].labels.bad key!", "pools[1].allocatable.cpu",
                     "pools[1].allocatable.fpga", "pools[1].lifecycle.exit_code",
                     "pools[1].lifecycle.failure_fraction"], paths
    assert str(info.value).count("\n") == len(paths) - 1 and all(
        line.startswith("f.yaml: ") and "expected" in line for line in str(info.value).splitlines())
    # once each pool is valid, the cross-pool checks report together
    doc = {"pools": [{"name": "a", "count": 40_000, "resources": {"cpu": "1", "memory": "1Gi"}},
                     {"name": "a", "count": 30_000, "resources": {"cpu": "1", "memory": "1Gi"}}]}
    with pytest.raises(SpecError) as info:
        parse_pools(doc, "f.yaml")
    assert [e.path for e in info.value.errors] == ["pools[1].name", "pools"]
    assert "expected at most 65536 nodes in all pools, got 70000" in str(info.value)


def test_document_level_errors() -> None:
    with pytest.raises(PoolsError, match=r"^f\.yaml: pools: expected a list, got a mapping$"):
        parse_pools({"pools": {"name": "x"}}, "f.yaml")
    with pytest.raises(PoolsError, match=r"^f\.yaml: nodes: unknown key \(expected one of: pools\)$"):
        parse_pools({"pools": [], "nodes": 1}, "f.yaml")
    with pytest.raises(PoolsError, match=r"^f\.yaml: pools: is required$"):
        parse_pools({}, "f.yaml")
    with pytest.raises(PoolsError, match=r"^f\.yaml: pools\[0\]: expected a mapping, got int 1$"):
        parse_pools([1], "f.yaml")
    with pytest.raises(PoolsError, match=r"^f\.yaml: expected a mapping, got int 3$"):
        parse_pools(3, "f.yaml")


def test_load_pools_reads_strict_yaml(tmp_path: Path) -> None:
    with pytest.raises(PoolsError, match=r"missing\.yaml: file not found"):
        load_pools(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools: [\n")
    with pytest.raises(PoolsError, match=r"bad\.yaml: not valid YAML"):
        load_pools(bad)
    twice = tmp_path / "twice.yaml"
    twice.write_text("pools:\n  - name: g\n    count: 2\n    count: 2000\n    resources: {cpu: '8', memory: 1Gi}\n")
    with pytest.raises(PoolsError, match=r"twice\.yaml: not accepted \(line 4, column 5: key 'count' given twice"):
        load_pools(twice)
    norway = tmp_path / "norway.yaml"
    norway.write_text("pools:\n  - {name: g, count: 2, resources: {cpu: '8', memory: 1Gi}, labels: {country: no}}\n")
    with pytest.raises(PoolsError, match=r"'no' is a boolean in YAML 1\.1"):
        load_pools(norway)
    good = tmp_path / "good.yaml"
    good.write_text("pools:\n  - {name: g, count: 2, resources: {cpu: '8', memory: 32Gi, nvidia.com/gpu: '8'}}\n")
    assert load_pools(good)[0].capacity["nvidia.com/gpu"] == "8"


CUSTOM_STAGES = """\
stages:
  - name: pod-ready
    action: start
    selector: {phases: [Pending]}
    delay: startup
    anchor: now
"""


def test_stages_file_is_relative_to_the_pools_file_and_loaded_at_validation(tmp_path: Path) -> None:
    (tmp_path / "lifecycle").mkdir()
    (tmp_path / "lifecycle" / "quick.yaml").write_text(CUSTOM_STAGES)
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text("pools:\n  - {name: g, count: 1, resources: {cpu: '8', memory: 1Gi}, "
                          "stages: lifecycle/quick.yaml}\n  - {name: h, count: 1, resources: {cpu: '8', memory: 1Gi}}\n")
    g, h = load_pools(pools_file)
    assert g.stages is not None and [s.name for s in g.stages] == ["pod-ready"] and g.stages[0].anchor == "now"
    assert h.stages is None
    # parse_pools resolves against base_dir (the scenario's folder), not the current directory
    doc = yaml.safe_load(pools_file.read_text())
    assert parse_pools(doc, "scenario.yaml", base_dir=tmp_path)[0].stages == g.stages
    with pytest.raises(SpecError, match=r"^scenario\.yaml: pools\[0\]\.stages: \S*elsewhere/lifecycle/quick\.yaml: "
                                        r"file not found$"):
        parse_pools(doc, "scenario.yaml", base_dir=tmp_path / "elsewhere")


def test_bad_stages_file_is_reported_under_the_pool(tmp_path: Path) -> None:
    stages = tmp_path / "bad-stages.yaml"
    stages.write_text("stages:\n  - {name: a, action: begin, selector: {phases: [Runing]}}\n"
                      "  - {name: a, action: start, speed: 2}\n")
    (tmp_path / "pools.yaml").write_text(
        "pools:\n  - {name: g, count: 1, resources: {cpu: '8', memory: 1Gi}}\n"
        "  - {name: h, count: 1, resources: {cpu: '8', memory: 1Gi}, stages: bad-stages.yaml}\n")
    with pytest.raises(SpecError) as info:
        load_pools(tmp_path / "pools.yaml")
    lines = str(info.value).splitlines()
    where = f"{tmp_path / 'pools.yaml'}: pools[1].stages: {stages}: "
    assert lines == [
        where + "stages[0].action: expected one of start, finish, finalize, prepare, got 'begin'",
        where + "stages[0].selector.phases[0]: expected one of Pending, Running, Succeeded, Failed, Unknown, "
                "got 'Runing'",
        where + "stages[1].speed: unknown key (expected one of: action, anchor, delay, name, selector)",
    ], lines
    stages.write_text("stages:\n  - {name: a, action: start}\n  - {name: a, action: finish}\n")
    with pytest.raises(SpecError, match=r"stages\[1\]\.name: expected a name not used by an earlier stage "
                                        r"\(stages\[0\]\), got 'a'"):
        load_pools(tmp_path / "pools.yaml")


def test_pools_type_embeds_the_same_validation_in_a_scenario_model(tmp_path: Path) -> None:
    class Scenario(Spec):
        name: str
        pools: Pools

    doc = {"name": "s", "pools": copy.deepcopy(GOOD["pools"])}
    scenario = validate(Scenario, doc, "scenario.yaml")
    assert [p.first_ordinal for p in scenario.pools] == [0, 200]
    assert list(scenario.pools) == parse_pools(GOOD, "pools.yaml")
    doc["pools"][1]["name"] = "v100"
    doc["pools"][1]["count"] = 70_000
    with pytest.raises(SpecError) as info:
        validate(Scenario, doc, "scenario.yaml")
    assert str(info.value) == "scenario.yaml: pools[1].count: expected an integer <= 65536, got 70000"
    doc["pools"][1]["count"] = 3
    with pytest.raises(SpecError, match=r"scenario\.yaml: pools\[1\]\.name: expected a name not used"):
        validate(Scenario, doc, "scenario.yaml")
    (tmp_path / "s.yaml").write_text(CUSTOM_STAGES)
    doc["pools"][1]["name"] = "x"
    doc["pools"][1]["stages"] = "s.yaml"
    embedded = Scenario.model_validate(doc, context={"base_dir": str(tmp_path)})
    assert embedded.pools[1].stages is not None and embedded.pools[1].stages[0].anchor == "now"


def test_specs_are_frozen() -> None:
    pool = parse_pools(GOOD, "f")[0]
    with pytest.raises(ValueError, match="frozen"):
        pool.count = 3  # type: ignore[misc]


def test_round_trip_through_the_document_the_runner_writes(tmp_path: Path) -> None:
    doc = copy.deepcopy(GOOD)
    doc["pools"][0]["stages"] = [{"name": "only-start", "action": "start", "delay": "startup", "anchor": "bound",
                                  "selector": {"phases": ["Pending"], "restart_policies": ["Never"]}}]
    doc["pools"][0]["lifecycle"] = {"run_duration": {"dist": "lognormal", "median": "30s", "sigma": 0.5, "max": "5m"},
                                    "startup_delay": {"dist": "normal", "mean": "1.5s", "stddev": "250ms"}}
    doc["pools"][0]["annotations"] = {"example.com/note": "any text: here"}
    pools = parse_pools(doc, "f")
    out = pools_to_doc(pools)
    assert parse_pools(out, "again") == pools
    # through YAML text, in another folder (stages travel inline, not as a path)
    path = tmp_path / "sub" / "agent-pools.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(out, sort_keys=False))
    assert load_pools(path) == pools
    assert pools_to_doc(load_pools(path)) == out
    # the default stages too
    assert parse_pools(pools_to_doc(parse_pools(GOOD, "f")), "g") == parse_pools(GOOD, "f")
    assert default_stages()[0].name == "pod-delete"


_names = st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True)
_durations = st.one_of(
    st.integers(0, 10**6).map(lambda ms: f"{ms}ms"),
    st.integers(0, 10**5).map(lambda s: s),
    st.just("forever"),
    st.tuples(st.integers(0, 3600), st.integers(0, 3600)).map(
        lambda t: {"dist": "uniform", "min": f"{min(t)}s", "max": f"{max(t)}s"}),
    st.tuples(st.integers(1, 600), st.integers(0, 100)).map(
        lambda t: {"dist": "normal", "mean": f"{t[0]}s", "stddev": f"{t[1]}s", "min": "1s"}),
    st.tuples(st.integers(1, 600), st.floats(0, 3)).map(
        lambda t: {"dist": "lognormal", "median": f"{t[0]}s", "sigma": t[1]}),
)


@st.composite
def _pool_docs(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(_names, min_size=1, max_size=4, unique=True))
    out = []
    for name in names:
        cpu = draw(st.integers(1, 256))
        pool: dict[str, Any] = {
            "name": name, "count": draw(st.integers(0, 500)),
            "resources": {"cpu": str(cpu), "memory": f"{draw(st.integers(1, 4096))}Gi",
                          "nvidia.com/gpu": draw(st.integers(0, 8))},
            "allocatable": {"cpu": f"{draw(st.integers(0, cpu * 1000))}m"},
            "labels": draw(st.dictionaries(_names, _names, max_size=3)),
            "taints": [{"key": k, "effect": "NoSchedule"} for k in draw(st.lists(_names, max_size=2))],
            "topology": {"zones": draw(st.lists(_names, max_size=3, unique=True))},
            "lifecycle": {"run_duration": draw(_durations), "exit_code": draw(st.integers(0, 255)),
                          "failure_fraction": draw(st.floats(0, 1))},
        }
        if draw(st.booleans()):
            pool["role"] = draw(_names)
        out.append(pool)
    return out


@settings(max_examples=150, deadline=None)
@given(_pool_docs())
def test_round_trip_property(docs: list[dict[str, Any]]) -> None:
    pools = parse_pools(docs, "generated")
    assert all(isinstance(p, PoolSpec) for p in pools)
    again = parse_pools(yaml.safe_load(yaml.safe_dump(pools_to_doc(pools))), "written")
    assert again == pools
    assert [p.first_ordinal for p in again] == [sum(p.count for p in pools[:i]) for i in range(len(pools))]
