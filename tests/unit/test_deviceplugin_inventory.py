"""Device inventories (fake and real) and what Allocate hands a container.

The real-GPU path is checked against a fake ``/dev``, ``/proc`` and ``/sys`` tree and recorded
``nvidia-smi``/``ldconfig`` output: this machine has no GPU, and what matters here is that the files the
plugin names are exactly those of the allocated GPUs (a container must not see the other GPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hollowscale.deviceplugin.allocation import (
    CONTAINER_LIB_DIR,
    AllocationError,
    DeviceFile,
    DriverFiles,
    allocate,
    find_driver_files,
    parse_ldconfig,
    preferred,
)
from hollowscale.deviceplugin.inventory import (
    Inventory,
    InventoryError,
    fake_inventory,
    parse_gpus,
    product_label,
)

SMI = """\
0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H200, 00000000:18:00.0
1, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, NVIDIA H200, 00000000:2A:00.0
"""
LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
"""


def test_fake_ids_are_stable_and_node_unique() -> None:
    a = fake_inventory("real-0", 3, "NVIDIA H100 80GB HBM3")
    assert a.ids == ["real-0-gpu-0", "real-0-gpu-1", "real-0-gpu-2"]
    assert a.ids == fake_inventory("real-0", 3, "x").ids
    assert not set(a.ids) & set(fake_inventory("real-1", 3, "x").ids)
    assert not a.real
    assert {g.model for g in a.gpus} == {"NVIDIA-H100-80GB-HBM3"}
    assert a.node_labels() == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "3"}


@pytest.mark.parametrize(("node", "count", "message"), [
    ("real-0", 0, "at least 1"),
    ("", 2, "--node must name"),
    ("n" * 60, 2, "the kubelet allows 63"),
])
def test_fake_inventory_errors(node: str, count: int, message: str) -> None:
    with pytest.raises(InventoryError, match=message):
        fake_inventory(node, count, "m")


def test_product_label_is_a_label_value() -> None:
    assert product_label("NVIDIA H200") == "NVIDIA-H200"
    assert product_label("Tesla V100-SXM2-32GB") == "Tesla-V100-SXM2-32GB"
    assert product_label("  weird (name)/x ") == "weird-name-x"
    assert len(product_label("x" * 100)) == 63


def _fake_host(tmp_path: Path) -> tuple[Path, Path, Path]:
    """/proc and /sys entries of two GPUs whose minor numbers are NOT their nvidia-smi indices."""
    proc, sys_, dev = tmp_path / "proc", tmp_path / "sys", tmp_path / "dev"
    for bus, minor, numa in (("0000:18:00.0", 3, "0"), ("0000:2a:00.0", 5, "-1")):
        info = proc / "driver" / "nvidia" / "gpus" / bus
        info.mkdir(parents=True)
        (info / "information").write_text(f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nDevice Minor: \t {minor}\n")
        pci = sys_ / "bus" / "pci" / "devices" / bus
        pci.mkdir(parents=True)
        (pci / "numa_node").write_text(numa + "\n")
    dev.mkdir()
    for name in ("nvidia3", "nvidia5", "nvidiactl", "nvidia-uvm"):  # no nvidia-uvm-tools on this "host"
        (dev / name).touch()
    return proc, sys_, dev


def test_parse_gpus_reads_uuid_model_minor_and_numa(tmp_path: Path) -> None:
    proc, sys_, _ = _fake_host(tmp_path)
    gpus = parse_gpus(SMI, proc_root=proc, sys_root=sys_)
    assert [(g.id, g.model, g.minor, g.numa_node) for g in gpus] == [
        ("GPU-11111111-2222-3333-4444-555555555555", "NVIDIA-H200", 3, 0),
        ("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "NVIDIA-H200", 5, None),
    ]


def test_parse_gpus_falls_back_to_the_index_without_procfs(tmp_path: Path) -> None:
    gpus = parse_gpus(SMI, proc_root=tmp_path / "none", sys_root=tmp_path / "none")
    assert [g.minor for g in gpus] == [0, 1]


def test_parse_gpus_refuses_unreadable_output() -> None:
    with pytest.raises(InventoryError, match="line 1"):
        parse_gpus("No devices were found\n")


def test_parse_ldconfig_keeps_64_bit_entries() -> None:
    libs = parse_ldconfig(LDCONFIG)
    assert libs["libcuda.so.1"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    assert "libc.so.6" in libs


def test_real_allocation_passes_only_the_allocated_gpus_device_files(tmp_path: Path) -> None:
    proc, sys_, dev = _fake_host(tmp_path)
    inventory = Inventory(gpus=parse_gpus(SMI, proc_root=proc, sys_root=sys_), real=True, dev_root=dev)
    driver = find_driver_files(dev, ldconfig_output=LDCONFIG)
    assert driver.control_devices == (str(dev / "nvidiactl"), str(dev / "nvidia-uvm"))
    assert driver.libraries == {"libcuda.so.1": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                "libnvidia-ml.so.1": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}
    second = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    share = allocate(inventory, [second], driver)
    assert share.envs["NVIDIA_VISIBLE_DEVICES"] == second
    assert share.envs["HOLLOWSCALE_GPU_IDS"] == second
    assert share.envs["LD_LIBRARY_PATH"] == CONTAINER_LIB_DIR
    assert share.devices == (
        DeviceFile("/dev/nvidia5", str(dev / "nvidia5")),  # the GPU's own minor, not nvidia-smi's index 1
        DeviceFile("/dev/nvidiactl", str(dev / "nvidiactl")),
        DeviceFile("/dev/nvidia-uvm", str(dev / "nvidia-uvm")),
    )
    assert {(m.container_path, m.host_path, m.read_only) for m in share.mounts} >= {
        (f"{CONTAINER_LIB_DIR}/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", True),
        (f"{CONTAINER_LIB_DIR}/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", True),
    }


def test_real_allocation_without_driver_files_still_names_the_devices(tmp_path: Path) -> None:
    proc, sys_, dev = _fake_host(tmp_path)
    inventory = Inventory(gpus=parse_gpus(SMI, proc_root=proc, sys_root=sys_), real=True, dev_root=dev)
    share = allocate(inventory, inventory.ids, DriverFiles())
    assert [d.container_path for d in share.devices] == ["/dev/nvidia3", "/dev/nvidia5"]
    assert not share.mounts
    assert "LD_LIBRARY_PATH" not in share.envs


def test_allocate_errors() -> None:
    inventory = fake_inventory("real-0", 2, "m")
    with pytest.raises(AllocationError, match="unknown device"):
        allocate(inventory, ["real-0-gpu-2"])
    with pytest.raises(AllocationError, match="no device"):
        allocate(inventory, [])


def test_preferred_fills_lowest_first_around_must_include() -> None:
    inventory = fake_inventory("n", 8, "m")
    ids = inventory.ids
    assert preferred(inventory, [ids[5], ids[2], ids[7], ids[0]], [], 2) == [ids[0], ids[2]]
    assert preferred(inventory, [ids[5], ids[2], ids[7]], [ids[7]], 3) == [ids[7], ids[2], ids[5]]
    assert preferred(inventory, ids, ids[:2], 2) == ids[:2]
