"""The DRA plugin's gRPC services called the way the kubelet calls them (a real gRPC client over the plugin's
unix sockets, the kubelet's own protos compiled), with the API's claims from a dict; and the slice publisher
against a fake API."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from hollow.dra import DRIVER, GpuSpec
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2 as reg
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2_grpc as reg_grpc
from hollowscale.draplugin._generated import dra_v1_pb2 as v1
from hollowscale.draplugin._generated import dra_v1_pb2_grpc as v1_grpc
from hollowscale.draplugin._generated import dra_v1beta1_pb2 as v1beta1
from hollowscale.draplugin._generated import dra_v1beta1_pb2_grpc as v1beta1_grpc
from hollowscale.draplugin.api import ApiError
from hollowscale.draplugin.checkpoint import Checkpoint, CheckpointError
from hollowscale.draplugin.inventory import fake_inventory
from hollowscale.draplugin.publisher import SlicePublisher
from hollowscale.draplugin.server import DraPluginServer, Driver, PluginError, PluginSettings
from hollowscale.draplugin.slices import wanted_slices
from hollowscale.paths import short_temp_dir

NODE = "real-0"


def _claim(name: str, uid: str, device: str | None = "gpu-0", **result: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if device is not None:
        status = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device, **result}]}}}
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid}, "status": status}


class Claims:
    """The API's claims: a dict, and a count of reads."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.reads = 0

    def add(self, claim: dict[str, Any]) -> None:
        self.items[(claim["metadata"]["namespace"], claim["metadata"]["name"])] = claim

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        if name == "broken":
            raise ApiError("GET ...: HTTP 500: etcd is gone", 500)
        return copy.deepcopy(self.items.get((namespace, name)))


@pytest.fixture
def root() -> Iterator[Path]:
    """A short path: unix socket paths are limited to 107 bytes."""
    path = short_temp_dir("dra-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def claims() -> Claims:
    return Claims()


def _settings(root: Path) -> PluginSettings:
    (root / "kubelet").mkdir(exist_ok=True)
    return PluginSettings(kubelet_root=root / "kubelet", node=NODE, cdi_dir=root / "cdi")


def _driver(root: Path, claims: Claims, spec: GpuSpec | None = None) -> Driver:
    return Driver(_settings(root), fake_inventory(NODE, 2, spec or GpuSpec(expose="dra")), claims.get)


@pytest.fixture
def plugin(root: Path, claims: Claims) -> Iterator[DraPluginServer]:
    registered: list[bool] = []
    server = DraPluginServer(_settings(root), _driver(root, claims), on_registered=lambda: registered.append(True))
    server.start()
    try:
        yield server
    finally:
        server.stop(grace_s=1)


def _channel(path: Path) -> grpc.Channel:
    ch = grpc.insecure_channel(f"unix://{path}")
    grpc.channel_ready_future(ch).result(timeout=5)
    return ch


def _ref(name: str, uid: str) -> Any:
    return v1.Claim(namespace="ns", name=name, uid=uid)


def test_sockets_are_where_the_kubelet_and_the_go_helper_put_them(plugin: DraPluginServer, root: Path) -> None:
    kubelet = root / "kubelet"
    assert plugin.settings.registration_socket == kubelet / "plugins_registry" / "gpu.nvidia.com-reg.sock"
    assert plugin.settings.plugin_socket == kubelet / "plugins" / "gpu.nvidia.com" / "dra.sock"
    assert plugin.settings.registration_socket.is_socket() and plugin.settings.plugin_socket.is_socket()


def test_registration_answers_what_the_v136_kubelet_accepts(plugin: DraPluginServer) -> None:
    calls: list[bool] = []
    plugin.registration.on_registered = lambda: calls.append(True)
    with _channel(plugin.settings.registration_socket) as ch:
        stub = reg_grpc.RegistrationStub(ch)
        info = stub.GetInfo(reg.InfoRequest(), timeout=5)
        assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DRIVER, str(plugin.settings.plugin_socket))
        assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=False, error="nope"), timeout=5)
        assert plugin.registration.last_error == "nope" and not plugin.wait_registered(0) and not calls
        stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True), timeout=5)
        assert plugin.wait_registered(1) and calls == [True]


def test_prepare_and_unprepare_through_v1(plugin: DraPluginServer, claims: Claims) -> None:
    claims.add(_claim("a", "uid-a", "gpu-1"))
    claims.add(_claim("pending", "uid-p", None))
    with _channel(plugin.settings.plugin_socket) as ch:
        stub = v1_grpc.DRAPluginStub(ch)
        answer = stub.NodePrepareResources(v1.NodePrepareResourcesRequest(claims=[
            _ref("a", "uid-a"), _ref("pending", "uid-p"), _ref("missing", "uid-m"), _ref("broken", "uid-b")]),
            timeout=5)
        assert set(answer.claims) == {"uid-a", "uid-p", "uid-m", "uid-b"}  # one answer per claim, errors included
        a = answer.claims["uid-a"]
        assert a.error == "" and len(a.devices) == 1
        dev = a.devices[0]
        assert (list(dev.request_names), dev.pool_name, dev.device_name) == (["gpu"], NODE, "gpu-1")
        assert list(dev.cdi_device_ids) == ["k8s.gpu.nvidia.com/claim=uid-a-gpu-1"] and not dev.HasField("share_id")
        assert "is not allocated" in answer.claims["uid-p"].error
        assert "ResourceClaim ns/missing not found" in answer.claims["uid-m"].error
        assert "HTTP 500" in answer.claims["uid-b"].error
        spec = plugin.settings.cdi_dir / "k8s.gpu.nvidia.com-claim_uid-a.json"
        assert spec.exists()

        # a retry: the same answer from the checkpoint, the API not asked again
        reads = claims.reads
        again = stub.NodePrepareResources(v1.NodePrepareResourcesRequest(claims=[_ref("a", "uid-a")]), timeout=5)
        assert again.claims["uid-a"] == a and claims.reads == reads

        gone = stub.NodeUnprepareResources(v1.NodeUnprepareResourcesRequest(claims=[
            _ref("a", "uid-a"), _ref("never", "uid-n")]), timeout=5)
        assert {k: v.error for k, v in gone.claims.items()} == {"uid-a": "", "uid-n": ""}
        assert not spec.exists() and plugin.driver.checkpoint.all() == []


def test_v1beta1_is_served_too_without_share_ids(root: Path, claims: Claims) -> None:
    """v1beta1's Device has no share_id (the kubelet of 1.36 speaks v1; an older one gets the device)."""
    claims.add(_claim("s", "uid-s", "gpu-0", shareID="aaaa-share", consumedCapacity={"memory": "20Gi"}))
    server = DraPluginServer(_settings(root), _driver(root, claims, GpuSpec(expose="dra", sharing="memory")))
    server.start()
    try:
        with _channel(server.settings.plugin_socket) as ch:
            answer = v1beta1_grpc.DRAPluginStub(ch).NodePrepareResources(
                v1beta1.NodePrepareResourcesRequest(claims=[v1beta1.Claim(namespace="ns", name="s", uid="uid-s")]),
                timeout=5)
        dev = answer.claims["uid-s"].devices[0]
        assert dev.device_name == "gpu-0"
        assert list(dev.cdi_device_ids) == ["k8s.gpu.nvidia.com/claim=uid-s-gpu-0-aaaa-share"]
    finally:
        server.stop(grace_s=1)


def test_a_restarted_plugin_keeps_its_prepared_claims_and_writes_lost_cdi_specs(root: Path, claims: Claims) -> None:
    claims.add(_claim("a", "uid-a"))
    first = _driver(root, claims)
    (before,) = first.prepare([("ns", "uid-a", "a")]).values()
    spec = first.settings.cdi_dir / "k8s.gpu.nvidia.com-claim_uid-a.json"
    spec.unlink()  # a CDI dir under /run after a reboot
    claims.items.clear()  # the claim is no longer readable: the checkpoint must answer
    second = _driver(root, claims)
    assert second.restore() == 1 and spec.exists()
    assert second.prepare([("ns", "uid-a", "a")]) == {"uid-a": before}
    assert second.unprepare([("ns", "uid-a", "a")]) == {"uid-a": ""} and not spec.exists()


def test_a_checkpoint_that_cannot_be_read_is_refused(root: Path) -> None:
    bad = root / "checkpoint.json"
    bad.write_text("{not json")
    with pytest.raises(CheckpointError, match="move it away"):
        Checkpoint(bad)
    bad.write_text('{"version": 9, "claims": {}}')
    with pytest.raises(CheckpointError, match="not a version-1 checkpoint"):
        Checkpoint(bad)


def test_a_second_plugin_for_the_node_is_refused(plugin: DraPluginServer, root: Path, claims: Claims) -> None:
    with pytest.raises(PluginError, match="served by another process"):
        DraPluginServer(_settings(root), _driver(root, claims)).start()


def test_a_missing_kubelet_root_is_refused(root: Path, claims: Claims) -> None:
    settings = PluginSettings(kubelet_root=root / "nope", node=NODE, cdi_dir=root / "cdi")
    driver = Driver(settings, fake_inventory(NODE, 1, GpuSpec(expose="dra")), claims.get)
    with pytest.raises(PluginError, match="does not exist"):
        DraPluginServer(settings, driver).start()


# ------------------------------------------------------------------------------------------------ publisher


class FakeApi:
    """The apiserver's slices of one node, and its Node."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {NODE: {"metadata": {"name": NODE, "uid": "node-uid"}}}
        self.slices: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self._rv = 0

    def node(self, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.nodes.get(name))

    def node_slices(self, node: str, driver: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(s) for s in self.slices.values()
                if s["spec"]["nodeName"] == node and s["spec"]["driver"] == driver]

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self.slices[obj["metadata"]["name"]] = obj
        return obj

    def create_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {obj['metadata']['name']}")
        return self._store(obj)

    def update_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        assert obj["metadata"]["resourceVersion"] == self.slices[obj["metadata"]["name"]]["metadata"]["resourceVersion"]
        self.calls.append(f"update {obj['metadata']['name']} generation {obj['spec']['pool']['generation']}")
        return self._store(obj)

    def delete_slice(self, name: str) -> None:
        self.calls.append(f"delete {name}")
        del self.slices[name]


def test_publisher_creates_keeps_updates_and_removes_strays() -> None:
    api = FakeApi()
    inv = fake_inventory(NODE, 2, GpuSpec(expose="dra"))
    pub = SlicePublisher(api, inv, NODE)  # type: ignore[arg-type]
    assert pub.reconcile() == "created"
    assert pub.reconcile() == "unchanged"
    api.slices.clear()  # the kubelet restarted and wiped the node's slices
    assert pub.reconcile() == "created"
    api.nodes[NODE]["metadata"]["uid"] = "a-new-node"  # the Node was made again
    assert pub.reconcile() == "updated"
    stray = wanted_slices(inv, NODE, "x")[0]
    stray["metadata"]["name"] = "someone-elses"
    api.slices["someone-elses"] = stray
    assert pub.reconcile() == "unchanged"
    assert api.calls == ["create real-0-gpu.nvidia.com", "create real-0-gpu.nvidia.com",
                         "update real-0-gpu.nvidia.com generation 2", "delete someone-elses"]
    api.nodes.clear()
    assert pub.reconcile() == "no node"


def test_publisher_publishes_only_once_enabled() -> None:
    api = FakeApi()
    pub = SlicePublisher(api, fake_inventory(NODE, 1, GpuSpec(expose="dra")), NODE, interval_s=0.05)  # type: ignore[arg-type]
    pub.start()
    try:
        assert not pub.published.wait(0.3) and api.calls == []
        pub.enable()
        assert pub.published.wait(5)
        assert api.calls == ["create real-0-gpu.nvidia.com"]
    finally:
        pub.stop()
