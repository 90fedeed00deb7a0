"""The device plugin's gRPC services, called the way the kubelet calls them: a real gRPC client over the
plugin's unix socket (the kubelet's own protos, compiled), no mocks of either side."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from hollowscale.deviceplugin._generated import deviceplugin_v1beta1_pb2 as dp
from hollowscale.deviceplugin._generated import deviceplugin_v1beta1_pb2_grpc as dp_grpc
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2 as reg
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2_grpc as reg_grpc
from hollowscale.deviceplugin.health import HealthWatcher
from hollowscale.deviceplugin.inventory import fake_inventory
from hollowscale.deviceplugin.server import PluginError, PluginServer, PluginSettings
from hollowscale.paths import short_temp_dir

NODE = "real-0"


@pytest.fixture
def kubelet_root() -> Iterator[Path]:
    """A short path: unix socket paths are limited to 107 bytes, pytest's tmp_path can come close."""
    root = short_temp_dir("dp-")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def plugin(kubelet_root: Path) -> Iterator[PluginServer]:
    server = PluginServer(PluginSettings(kubelet_root=kubelet_root, node=NODE), fake_inventory(NODE, 4, "NVIDIA H200"))
    server.start()
    try:
        yield server
    finally:
        server.stop(grace_s=1)


@pytest.fixture
def channel(plugin: PluginServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"unix://{plugin.settings.socket_path}") as ch:
        grpc.channel_ready_future(ch).result(timeout=5)
        yield ch


def test_socket_is_in_the_kubelets_plugin_registry(plugin: PluginServer, kubelet_root: Path) -> None:
    path = kubelet_root / "plugins_registry" / "nvidia.com_gpu.sock"
    assert plugin.settings.socket_path == path
    assert path.is_socket()


def test_get_info_answers_what_the_plugin_watcher_expects(channel: grpc.Channel, plugin: PluginServer) -> None:
    info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=5)
    assert info.type == "DevicePlugin"
    assert info.name == "nvidia.com/gpu"
    assert info.endpoint == str(plugin.settings.socket_path)
    assert list(info.supported_versions) == ["v1beta1"]


def test_a_kubelet_in_another_mount_namespace_is_given_the_socket_as_it_sees_it(kubelet_root: Path) -> None:
    # a kind node: <kubelet_root>/plugins_registry is mounted at /var/lib/kubelet/plugins_registry inside it
    here = PluginSettings(kubelet_root=kubelet_root, node=NODE)
    inside = PluginSettings(kubelet_root=kubelet_root, node=NODE, kubelet_view=Path("/var/lib/kubelet"))
    assert here.endpoint == str(here.socket_path)
    assert inside.socket_path == here.socket_path  # served in the same place
    assert inside.endpoint == "/var/lib/kubelet/plugins_registry/nvidia.com_gpu.sock"


def test_notify_registration_status_is_recorded(channel: grpc.Channel, plugin: PluginServer) -> None:
    stub = reg_grpc.RegistrationStub(channel)
    assert not plugin.wait_registered(0)
    stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=False, error="bad name"), timeout=5)
    assert plugin.registration.last_error == "bad name"
    assert not plugin.wait_registered(0)
    stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True), timeout=5)
    assert plugin.wait_registered(1)
    assert plugin.registration.last_error == ""


def test_device_plugin_options(channel: grpc.Channel) -> None:
    opts = dp_grpc.DevicePluginStub(channel).GetDevicePluginOptions(dp.Empty(), timeout=5)
    assert opts.get_preferred_allocation_available is True
    assert opts.pre_start_required is False


def _next(stream: grpc.Future, timeout_s: float) -> dp.ListAndWatchResponse:
    """The stream's next message within ``timeout_s`` (a thread: a gRPC response iterator has no timeout)."""
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(next(stream)), daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert box, f"no ListAndWatch message within {timeout_s} s"
    message = box[0]
    assert isinstance(message, dp.ListAndWatchResponse)
    return message


def _health(message: dp.ListAndWatchResponse) -> dict[str, str]:
    return {d.ID: d.health for d in message.devices}


def test_list_and_watch_lists_then_streams_health_changes(channel: grpc.Channel, plugin: PluginServer) -> None:
    stream = dp_grpc.DevicePluginStub(channel).ListAndWatch(dp.Empty())
    try:
        first = _next(stream, 5)
        assert _health(first) == {f"{NODE}-gpu-{i}": "Healthy" for i in range(4)}
        assert [d.ID for d in first.devices] == [f"{NODE}-gpu-{i}" for i in range(4)]

        plugin.state.set_unhealthy("test", {f"{NODE}-gpu-2"})
        second = _next(stream, 5)
        assert _health(second)[f"{NODE}-gpu-2"] == "Unhealthy"
        assert sum(h == "Healthy" for h in _health(second).values()) == 3

        plugin.state.set_unhealthy("test", set())
        assert set(_health(_next(stream, 5)).values()) == {"Healthy"}
        assert stream.is_active()  # the stream stays open between changes
    finally:
        stream.cancel()


def test_same_health_twice_sends_nothing_new(channel: grpc.Channel, plugin: PluginServer) -> None:
    stream = dp_grpc.DevicePluginStub(channel).ListAndWatch(dp.Empty())
    try:
        _next(stream, 5)
        version = plugin.state.version
        plugin.state.set_unhealthy("test", set())  # nothing changes: no new version, no message
        plugin.state.set_unhealthy("test", {"not-a-device"})  # unknown IDs are dropped, still no change
        assert plugin.state.version == version
    finally:
        stream.cancel()


def test_health_file_marks_devices_unhealthy(channel: grpc.Channel, plugin: PluginServer, kubelet_root: Path) -> None:
    health_file = kubelet_root / "unhealthy"
    watcher = HealthWatcher(plugin.state, interval_s=0.1, health_file=health_file)
    watcher.start()
    stream = dp_grpc.DevicePluginStub(channel).ListAndWatch(dp.Empty())
    try:
        assert set(_health(_next(stream, 5)).values()) == {"Healthy"}
        health_file.write_text(f"# failed XID 79\n{NODE}-gpu-0\n{NODE}-gpu-3  # fell off the bus\n")
        got = _health(_next(stream, 5))
        assert got == {f"{NODE}-gpu-0": "Unhealthy", f"{NODE}-gpu-1": "Healthy",
                       f"{NODE}-gpu-2": "Healthy", f"{NODE}-gpu-3": "Unhealthy"}
        health_file.unlink()
        assert set(_health(_next(stream, 5)).values()) == {"Healthy"}
    finally:
        stream.cancel()
        watcher.stop()


def test_allocate_returns_the_ids_in_the_envs(channel: grpc.Channel) -> None:
    req = dp.AllocateRequest()
    req.container_requests.add(devices_ids=[f"{NODE}-gpu-1", f"{NODE}-gpu-3"])
    req.container_requests.add(devices_ids=[f"{NODE}-gpu-0"])
    resp = dp_grpc.DevicePluginStub(channel).Allocate(req, timeout=5)
    assert len(resp.container_responses) == 2
    first, second = resp.container_responses
    assert dict(first.envs) == {"NVIDIA_VISIBLE_DEVICES": f"{NODE}-gpu-1,{NODE}-gpu-3",
                                "HOLLOWSCALE_GPU_IDS": f"{NODE}-gpu-1,{NODE}-gpu-3",
                                "HOLLOWSCALE_GPU_MODEL": "NVIDIA-H200"}
    assert not first.devices and not first.mounts  # fake GPUs have no device files
    assert second.envs["HOLLOWSCALE_GPU_IDS"] == f"{NODE}-gpu-0"


def test_allocate_refuses_unknown_devices(channel: grpc.Channel) -> None:
    req = dp.AllocateRequest()
    req.container_requests.add(devices_ids=[f"{NODE}-gpu-1", "other-node-gpu-0"])
    with pytest.raises(grpc.RpcError) as err:
        dp_grpc.DevicePluginStub(channel).Allocate(req, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "other-node-gpu-0" in (err.value.details() or "")


def test_preferred_allocation_keeps_must_include_and_fills_in_order(channel: grpc.Channel) -> None:
    req = dp.PreferredAllocationRequest()
    req.container_requests.add(available_deviceIDs=[f"{NODE}-gpu-{i}" for i in (3, 1, 2)],
                               must_include_deviceIDs=[f"{NODE}-gpu-3"], allocation_size=2)
    resp = dp_grpc.DevicePluginStub(channel).GetPreferredAllocation(req, timeout=5)
    assert list(resp.container_responses[0].deviceIDs) == [f"{NODE}-gpu-3", f"{NODE}-gpu-1"]


def test_pre_start_container_is_a_no_op(channel: grpc.Channel) -> None:
    resp = dp_grpc.DevicePluginStub(channel).PreStartContainer(dp.PreStartContainerRequest(devices_ids=["x"]), timeout=5)
    assert resp == dp.PreStartContainerResponse()


def test_stop_removes_the_socket_and_ends_the_stream(kubelet_root: Path) -> None:
    server = PluginServer(PluginSettings(kubelet_root=kubelet_root, node=NODE), fake_inventory(NODE, 2, "m"))
    server.start()
    with grpc.insecure_channel(f"unix://{server.settings.socket_path}") as ch:
        stream = dp_grpc.DevicePluginStub(ch).ListAndWatch(dp.Empty())
        _next(stream, 5)
        started = time.monotonic()
        server.stop(grace_s=2)
        assert not server.settings.socket_path.exists()
        with pytest.raises((StopIteration, grpc.RpcError)):  # the kubelet sees the stream end
            _drain(stream)
        assert time.monotonic() - started < 6


def _drain(stream: grpc.Future) -> None:
    while True:
        next(stream)


def test_a_stale_socket_is_replaced_and_a_live_one_refused(kubelet_root: Path) -> None:
    settings = PluginSettings(kubelet_root=kubelet_root, node=NODE)
    settings.registry_dir.mkdir()
    import socket

    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(settings.socket_path))  # bound, never listening, then closed: what a killed plugin leaves
    stale.close()
    first = PluginServer(settings, fake_inventory(NODE, 1, "m"))
    first.start()
    try:
        second = PluginServer(settings, fake_inventory(NODE, 1, "m"))
        with pytest.raises(PluginError, match="served by another process"):
            second.start()
    finally:
        first.stop(grace_s=1)


def test_start_errors_say_what_is_wrong(kubelet_root: Path) -> None:
    missing = PluginServer(PluginSettings(kubelet_root=kubelet_root / "nope", node=NODE), fake_inventory(NODE, 1, "m"))
    with pytest.raises(PluginError, match="does not exist"):
        missing.start()
    deep = kubelet_root / ("d" * 90)
    deep.mkdir()
    too_long = PluginServer(PluginSettings(kubelet_root=deep, node=NODE), fake_inventory(NODE, 1, "m"))
    with pytest.raises(PluginError, match="unix sockets allow 107"):
        too_long.start()
    (kubelet_root / "plugins_registry").mkdir()
    (kubelet_root / "plugins_registry" / "nvidia.com_gpu.sock").write_text("not a socket")
    blocked = PluginServer(PluginSettings(kubelet_root=kubelet_root, node=NODE), fake_inventory(NODE, 1, "m"))
    with pytest.raises(PluginError, match="not a socket"):
        blocked.start()
