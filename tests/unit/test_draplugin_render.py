"""The DRA plugin's pure parts against golden files: inventory -> ResourceSlices, claim -> prepared devices and
CDI spec, and the runtime wrapper's script.

``tests/fixtures/draplugin/*.json`` hold a real node's slices (fake H100s; memory sharing), the prepared answer
and CDI spec of a claim (a whole GPU; two memory shares of one GPU; a real GPU with its device files and
libraries).  A change of what a real node publishes or what a container gets shows as a diff of a readable
file.  Regenerate after an intended change with ``HOLLOWSCALE_UPDATE_GOLDEN=1 pytest
tests/unit/test_draplugin_render.py`` and review the diff.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from hollow.dra import DRIVER, GpuSpec, node_slices, pool_devices
from hollowscale.deviceplugin.allocation import DriverFiles
from hollowscale.deviceplugin.inventory import Gpu, Inventory
from hollowscale.draplugin.inventory import (
    ORDINAL_BASE,
    InventoryError,
    fake_inventory,
    node_ordinal,
    parse_details,
    real_from,
)
from hollowscale.draplugin.prepare import PrepareError, cdi_kind, prepare_claim
from hollowscale.draplugin.runtime import wrapper_script
from hollowscale.draplugin.slices import LABELS, same_content, wanted_slices

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "draplugin"
UPDATE = os.environ.get("HOLLOWSCALE_UPDATE_GOLDEN") == "1"
NODE = "hs-real-0"
UID = "0b5e4d1c-0000-4000-8000-000000000001"


def _golden(name: str, doc: Any) -> None:
    path = FIXTURES / f"{name}.json"
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with HOLLOWSCALE_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{path.name} differs: run with HOLLOWSCALE_UPDATE_GOLDEN=1 and review the diff"


def _claim(results: list[dict[str, Any]], uid: str = UID, name: str = "trainer-gpu-x7k2p",
           allocated: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {"devices": {"results": results},
                                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}
        status["reservedFor"] = [{"resource": "pods", "name": "trainer", "uid": "pod-uid"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team-a", "uid": uid}, "status": status}


def _result(device: str, request: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": NODE, "device": device, **extra}


# ------------------------------------------------------------------------------------------ inventory, slices


@pytest.mark.parametrize("name,spec", [("slices-h100", GpuSpec(expose="dra")),
                                       ("slices-memory-sharing", GpuSpec(expose="dra", sharing="memory"))])
def test_slices_golden(name: str, spec: GpuSpec) -> None:
    _golden(name, wanted_slices(fake_inventory(NODE, 2, spec), NODE, "node-uid"))


def test_a_real_nodes_slices_are_a_hollow_nodes_with_its_own_uuids_and_label() -> None:
    """One definition: the fake inventory renders exactly what a hollow node of that pool publishes."""
    spec = GpuSpec(expose="dra", model="a100-40gb", partitions=("3g.20gb",))
    inv = fake_inventory(NODE, 2, spec)
    hollow = node_slices(NODE, "u", node_ordinal(NODE), spec, 2, LABELS)
    assert wanted_slices(inv, NODE, "u") == hollow
    assert len(hollow) == 2  # the counter sets' slice and the devices' slice
    assert [d.name for d in inv.devices] == [d.name for d in pool_devices(spec, 2, node_ordinal(NODE))]


def test_fake_uuids_are_stable_per_node_and_apart_from_hollow_nodes() -> None:
    a, b = fake_inventory(NODE, 2, GpuSpec(expose="dra")), fake_inventory(NODE, 2, GpuSpec(expose="dra"))
    assert a.gpus.ids == b.gpus.ids and len(set(a.gpus.ids)) == 2
    assert set(a.gpus.ids).isdisjoint(fake_inventory("hs-real-1", 2, GpuSpec(expose="dra")).gpus.ids)
    assert node_ordinal(NODE) >= ORDINAL_BASE
    assert all(uid.startswith("GPU-f") for uid in a.gpus.ids)
    assert not a.real
    with pytest.raises(InventoryError, match="at least 1"):
        fake_inventory(NODE, 0, GpuSpec(expose="dra"))


def test_same_content_compares_quantities_by_value_and_ignores_the_generation() -> None:
    (want,) = wanted_slices(fake_inventory(NODE, 1, GpuSpec(expose="dra", sharing="memory")), NODE, "u")
    got = copy.deepcopy(want)
    cap = got["spec"]["devices"][0]["capacity"]["memory"]
    cap["value"] = "85520809984"  # the same 81559Mi, as digits
    got["spec"]["pool"]["generation"] = 7
    got["metadata"]["resourceVersion"] = "42"
    assert same_content(got, want)
    changed = copy.deepcopy(want)
    changed["metadata"]["ownerReferences"][0]["uid"] = "a-new-node"
    assert not same_content(changed, want)
    fewer = copy.deepcopy(want)
    fewer["spec"]["devices"] = []
    assert not same_content(fewer, want)


def test_nvidia_smi_details_become_full_gpu_devices() -> None:
    csv = ("GPU-aaa, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 9.0, 550.163.01\n"
           "GPU-bbb, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 81559, 9.0, 550.163.01\n")
    details = parse_details(csv)
    assert details["GPU-aaa"] == {"product": "NVIDIA H100 80GB HBM3", "bus": "0000:18:00.0", "memory": "81559",
                                  "cc": "9.0.0", "architecture": "Hopper", "driver": "550.163.1"}
    gpus = Inventory(gpus=(Gpu(id="GPU-aaa", model="NVIDIA-H100-80GB-HBM3", minor=0),
                           Gpu(id="GPU-bbb", model="NVIDIA-H100-80GB-HBM3", minor=3)), real=True)
    inv = real_from(gpus, details, memory_shares=True)
    assert [d.name for d in inv.devices] == ["gpu-0", "gpu-3"]
    (s,) = wanted_slices(inv, NODE, "u")
    dev = s["spec"]["devices"][1]
    assert dev["attributes"]["uuid"] == {"string": "GPU-bbb"}
    assert dev["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": "0000:2a:00.0"}
    assert dev["attributes"]["driverVersion"] == {"version": "550.163.1"}
    assert dev["capacity"]["memory"]["value"] == "81559Mi" and dev["allowMultipleAllocations"] is True


# ------------------------------------------------------------------------------------------ claims -> devices


def test_whole_gpu_claim_golden() -> None:
    inv = fake_inventory(NODE, 2, GpuSpec(expose="dra"))
    prepared = prepare_claim(_claim([_result("gpu-1")]), UID, node=NODE, inventory=inv)
    _golden("prepared-whole-gpu", prepared.to_dict())
    (dev,) = prepared.devices
    assert dev.cdi_ids == (f"k8s.gpu.nvidia.com/claim={UID}-gpu-1",)
    assert prepared.cdi_spec is not None
    env = dict(e.split("=", 1) for e in prepared.cdi_spec["devices"][0]["containerEdits"]["env"])
    assert env["NVIDIA_VISIBLE_DEVICES"] == inv.gpus.ids[1] == env["HOLLOWSCALE_GPU_IDS"]
    assert env["HOLLOWSCALE_DRA_CLAIM"] == "team-a/trainer-gpu-x7k2p"


def test_memory_shares_golden() -> None:
    """Two shares of one GPU in one claim: two prepared devices, each with its share ID and memory."""
    inv = fake_inventory(NODE, 1, GpuSpec(expose="dra", sharing="memory"))
    claim = _claim([_result("gpu-0", "a", shareID="11111111-0000-4000-8000-00000000000a",
                            consumedCapacity={"memory": "20Gi"}),
                    _result("gpu-0", "b", shareID="22222222-0000-4000-8000-00000000000b",
                            consumedCapacity={"memory": "10Gi"})])
    prepared = prepare_claim(claim, UID, node=NODE, inventory=inv)
    _golden("prepared-memory-shares", prepared.to_dict())
    assert [d.share_id for d in prepared.devices] == ["11111111-0000-4000-8000-00000000000a",
                                                      "22222222-0000-4000-8000-00000000000b"]
    assert len({d.cdi_ids for d in prepared.devices}) == 2


def test_real_gpu_claim_golden(tmp_path: Path) -> None:
    """A real GPU: its device file, the control devices and the driver's libraries, as CDI edits."""
    gpus = Inventory(gpus=(Gpu(id="GPU-aaa", model="NVIDIA-H100-80GB-HBM3", minor=2),), real=True,
                     dev_root=Path("/dev"))
    details = {"GPU-aaa": {"product": "NVIDIA H100 80GB HBM3", "memory": "81559", "cc": "9.0.0",
                           "architecture": "Hopper", "driver": "550.163.1"}}
    driver = DriverFiles(control_devices=("/dev/nvidiactl", "/dev/nvidia-uvm"),
                         libraries={"libcuda.so.1": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
                         nvidia_smi="/usr/bin/nvidia-smi")
    prepared = prepare_claim(_claim([_result("gpu-2")]), UID, node=NODE, inventory=real_from(gpus, details),
                             driver_files=driver)
    _golden("prepared-real-gpu", prepared.to_dict())


def test_only_this_drivers_results_count_and_subrequests_name_their_main_request() -> None:
    inv = fake_inventory(NODE, 2, GpuSpec(expose="dra"))
    other = {"request": "nic", "driver": "net.example.com", "pool": "elsewhere", "device": "eth9"}
    prepared = prepare_claim(_claim([other, _result("gpu-0", "gpu/big")]), UID, node=NODE, inventory=inv)
    (dev,) = prepared.devices
    assert dev.requests == ("gpu/big", "gpu")
    none = prepare_claim(_claim([other]), UID, node=NODE, inventory=inv)
    assert none.devices == () and none.cdi_spec is None


@pytest.mark.parametrize("claim,uid,match", [
    (_claim([_result("gpu-0")], uid="another"), UID, "has UID another, the kubelet asked for"),
    (_claim([], allocated=False), UID, "is not allocated"),
    (_claim([{**_result("gpu-0"), "pool": "hs-real-9"}]), UID, "allocated from pool 'hs-real-9'"),
    (_claim([_result("gpu-7")]), UID, "device gpu-7 is not on node hs-real-0"),
])
def test_claims_that_cannot_be_prepared_here_say_why(claim: dict[str, Any], uid: str, match: str) -> None:
    with pytest.raises(PrepareError, match=match):
        prepare_claim(claim, uid, node=NODE, inventory=fake_inventory(NODE, 2, GpuSpec(expose="dra")))


def test_cdi_kind_is_the_drivers() -> None:
    assert cdi_kind() == "k8s.gpu.nvidia.com/claim"


def test_wrapper_script_sends_only_create_through_the_cdi_hook() -> None:
    script = wrapper_script("/v/bin/python", "/usr/sbin/runc", Path("/c/real/hs-real-0/kubelet"),
                            Path("/c/real/hs-real-0/cdi"))
    assert script.startswith("#!/bin/sh\n")
    assert ("exec /v/bin/python -m hollowscale.draplugin.runtime --runc /usr/sbin/runc --kubelet-root "
            '/c/real/hs-real-0/kubelet --cdi-dir /c/real/hs-real-0/cdi -- "$@"') in script
    assert script.rstrip().endswith('exec /usr/sbin/runc "$@"')
