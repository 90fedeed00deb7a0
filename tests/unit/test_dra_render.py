"""The DRA devices a hollow node publishes and the DeviceClasses a run creates, against golden files.

``tests/fixtures/dra/*.json`` hold the rendering of a small node of each kind (plain, memory sharing,
partitionable MIG) and of the classes; a change of what a hollow node publishes shows as a diff of a
readable file.  Regenerate after an intended change with
``HOLLOWSCALE_UPDATE_GOLDEN=1 pytest tests/unit/test_dra_render.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hollow.dra import (
    ATTRIBUTES,
    DRIVER,
    GPU_CLASS,
    MAX_DEVICES_WITH_COUNTERS,
    MIG_CLASS,
    GpuSpec,
    classes_for,
    device_classes,
    node_slices,
    pool_devices,
)
from kubecore.schema import SpecError, validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dra"
UPDATE = os.environ.get("HOLLOWSCALE_UPDATE_GOLDEN") == "1"

CASES: dict[str, tuple[dict[str, Any], int]] = {
    "slices-plain": ({"expose": "dra", "model": "h100-80gb"}, 2),
    "slices-memory-sharing": ({"expose": "dra", "model": "a100-40gb", "sharing": "memory"}, 2),
    "slices-mig": ({"expose": "dra", "model": "a100-40gb", "partitions": ["3g.20gb", "7g.40gb"]}, 2),
}


def _golden(name: str, doc: Any) -> None:
    path = FIXTURES / f"{name}.json"
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with HOLLOWSCALE_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{path.name} differs: run with HOLLOWSCALE_UPDATE_GOLDEN=1 and review the diff"


@pytest.mark.parametrize("name", sorted(CASES))
def test_slices_golden(name: str) -> None:
    spec, count = CASES[name]
    gpus = validate(GpuSpec, spec, "pool")
    _golden(name, node_slices("gpu-0", "0000-node-uid", 5, gpus, count, labels={"hollowscale.io/hollow": "true"}))


def test_classes_golden() -> None:
    _golden("classes", device_classes([validate(GpuSpec, CASES["slices-mig"][0], "p")], labels={"a": "b"}))


def test_slices_are_owned_by_the_node_and_name_its_pool() -> None:
    for s in node_slices("n-1", "uid-1", 1, GpuSpec(expose="dra"), 8):
        assert s["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n-1",
                                                     "uid": "uid-1", "controller": True}]
        assert s["spec"]["pool"] == {"name": "n-1", "generation": 1, "resourceSliceCount": 1}
        assert s["spec"]["driver"] == DRIVER and s["spec"]["nodeName"] == "n-1"


def test_one_device_per_gpu_with_the_drivers_attributes() -> None:
    (s,) = node_slices("n-1", "u", 1, GpuSpec(expose="dra"), 8)
    devices = s["spec"]["devices"]
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(8)]
    for d in devices:
        assert set(d["attributes"]) == set(ATTRIBUTES["gpu"])
        assert d["capacity"] == {"memory": {"value": "81559Mi"}}
        assert "allowMultipleAllocations" not in d
    assert len({d["attributes"]["uuid"]["string"] for d in devices}) == 8


def test_mig_pools_split_counters_and_devices_within_the_limits() -> None:
    gpus = GpuSpec(expose="dra", partitions=("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"))
    slices = node_slices("n", "u", 0, gpus, 8)
    assert "sharedCounters" in slices[0]["spec"] and len(slices[0]["spec"]["sharedCounters"]) == 8
    device_slices = slices[1:]
    assert all(len(s["spec"]["devices"]) <= MAX_DEVICES_WITH_COUNTERS for s in device_slices)
    assert sum(len(s["spec"]["devices"]) for s in device_slices) == 8 * (1 + 7 + 3 + 2 + 1 + 1)
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {len(slices)}
    assert len({s["metadata"]["name"] for s in slices}) == len(slices)


def test_classes_follow_the_pools() -> None:
    assert classes_for([GpuSpec()]) == []
    assert classes_for([GpuSpec(expose="both")]) == [GPU_CLASS]
    assert classes_for([GpuSpec(expose="dra", partitions=("1g.10gb",))]) == [GPU_CLASS, MIG_CLASS]
    (gpu,) = device_classes([GpuSpec(expose="dra")])
    assert gpu["spec"]["extendedResourceName"] == "nvidia.com/gpu"


def test_versions_are_normalised_and_bad_specs_refused() -> None:
    assert GpuSpec(driver_version="550.163.01").driver_version == "550.163.1"
    with pytest.raises(SpecError, match=r"driver_version: expected a version major\.minor\.patch"):
        validate(GpuSpec, {"driver_version": "x"}, "pools.yaml")
    with pytest.raises(SpecError) as exc:
        validate(GpuSpec, {"expose": "counted", "sharing": "memory", "model": "t4", "partitions": ["1g.10gb"]},
                 "pools.yaml")
    text = str(exc.value)
    assert "partitions[0]: expected a MIG profile of t4 (none: it has no MIG)" in text
    assert "sharing: expected none with partitions" in text


def test_pool_devices_match_the_slices() -> None:
    gpus = GpuSpec(expose="dra", model="a100-40gb", partitions=("3g.20gb",))
    names = [d.name for d in pool_devices(gpus, 2)]
    rendered = [d["name"] for s in node_slices("n", "u", 0, gpus, 2) for d in s["spec"].get("devices", [])]
    assert names == rendered
