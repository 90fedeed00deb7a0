"""Pool parsing: the documented format, defaults, and errors that name file, field and expectation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hollow.pools import PoolsError, load_pools, parse_pools

GOOD = {
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
            "podCIDR": "10.128.0.0/16",
            "podCIDRMaskSize": 26,
            "topology": {"region": "eu", "zones": ["z1", "z2"], "racksPerZone": 2},
            "lifecycle": {
                "startupDelay": {"mean": "2s", "jitter": "1s"},
                "runDuration": "forever",
                "exitCode": 0,
                "failureFraction": 0.1,
                "failureExitCode": 137,
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
    assert v100.lifecycle.run_duration.forever
    assert v100.first_ordinal == 0 and a100.first_ordinal == 200
    assert a100.allocatable["cpu"] == "95500m" and a100.capacity["cpu"] == "96"
    assert a100.taints[0].effect == "NoSchedule"
    assert a100.topology.zones == ("z1", "z2") and a100.topology.racks_per_zone == 2
    assert a100.lifecycle.startup_delay.kind == "uniform"
    assert a100.lifecycle.startup_delay.value == 2.0 and a100.lifecycle.startup_delay.jitter == 1.0
    assert math.isinf(a100.lifecycle.run_duration.value)
    assert a100.lifecycle.failure_exit_code == 137
    assert a100.node_name(2) == "a100-2"


def test_bare_list_is_accepted_for_embedded_sections() -> None:
    assert [p.name for p in parse_pools(GOOD["pools"], "scenario.yaml")] == ["v100", "a100"]


def _bad(mutate: dict, path: str) -> str:
    import copy

    doc = copy.deepcopy(GOOD)
    target = doc["pools"][1]
    for key, value in mutate.items():
        if value is ...:
            del target[key]
        else:
            target[key] = value
    with pytest.raises(PoolsError) as info:
        parse_pools(doc, "my-pools.yaml")
    message = str(info.value)
    assert message.startswith("my-pools.yaml: "), message
    assert path in message, message
    assert "expected" in message
    return message


@pytest.mark.parametrize(
    ("mutate", "path", "words"),
    [
        ({"resources": {"cpu": "64", "memory": "1Gi", "nvidia.com/gpu": "eight"}},
         "pools[1].resources.nvidia.com/gpu", "quantity"),
        ({"resources": {"cpu": "64"}}, "pools[1].resources.memory", "required"),
        ({"resources": {"cpu": "64", "memory": "1Gi", "nvidia.com/gpu": "0.5"}},
         "pools[1].resources.nvidia.com/gpu", "whole number"),
        ({"count": -1}, "pools[1].count", "integer"),
        ({"count": True}, "pools[1].count", "integer"),
        ({"count": ...}, "pools[1].count", "node count"),
        ({"name": "Bad_Name"}, "pools[1].name", "DNS label"),
        ({"name": "v100"}, "pools[1].name", "not used"),
        ({"gpus": 8}, "pools[1].gpus", "known keys"),
        ({"taints": [{"key": "k", "effect": "Sometimes"}]}, "pools[1].taints[0].effect", "NoExecute"),
        ({"labels": {"bad key!": "x"}}, "pools[1].labels.bad key!", "qualified name"),
        ({"labels": {"ok": "x" * 64}}, "pools[1].labels.ok", "63"),
        ({"podCIDR": "10.0.0.0/30"}, "pools[1].podCIDR", "/26"),
        ({"podCIDR": "not-a-net"}, "pools[1].podCIDR", "IPv4"),
        ({"allocatable": {"cpu": "100"}}, "pools[1].allocatable.cpu", "at most"),
        ({"lifecycle": {"runDuration": "ten minutes"}}, "pools[1].lifecycle.runDuration", "Go duration"),
        ({"lifecycle": {"startupDelay": "forever"}}, "pools[1].lifecycle.startupDelay", "finite"),
        ({"lifecycle": {"runDuration": {"mean": "1m", "distribution": "normal"}}},
         "pools[1].lifecycle.runDuration.jitter", "spread"),
        ({"lifecycle": {"exitCode": 300}}, "pools[1].lifecycle.exitCode", "0 to 255"),
        ({"lifecycle": {"failureFraction": 2}}, "pools[1].lifecycle.failureFraction", "0 to 1"),
        ({"lifecycle": {"exitcode": 1}}, "pools[1].lifecycle.exitcode", "known keys"),
        ({"topology": {"zones": "z1"}}, "pools[1].topology.zones", "list"),
    ],
)
def test_errors_name_field_and_expectation(mutate: dict, path: str, words: str) -> None:
    assert words in _bad(mutate, path)


def test_document_level_errors() -> None:
    with pytest.raises(PoolsError, match=r"f\.yaml: pools: expected a list of pools"):
        parse_pools({"pools": {"name": "x"}}, "f.yaml")
    with pytest.raises(PoolsError, match=r"f\.yaml: document\.nodes: expected one of the known keys"):
        parse_pools({"pools": [], "nodes": 1}, "f.yaml")
    with pytest.raises(PoolsError, match=r"f\.yaml: pools\[0\]: expected a mapping"):
        parse_pools([1], "f.yaml")


def test_load_pools_reports_file_problems(tmp_path: Path) -> None:
    with pytest.raises(PoolsError, match="cannot read"):
        load_pools(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools: [\n")
    with pytest.raises(PoolsError, match=r"bad\.yaml: not valid YAML"):
        load_pools(bad)
    good = tmp_path / "good.yaml"
    good.write_text("pools:\n  - {name: g, count: 2, resources: {cpu: '8', memory: 32Gi, nvidia.com/gpu: '8'}}\n")
    assert load_pools(good)[0].capacity["nvidia.com/gpu"] == "8"
