"""CDI spec files and their application to an OCI spec, and the runc wrapper's create path (the kubelet's
answer stubbed: no process, no socket)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hollow.dra import GpuSpec
from hollowscale.draplugin import cdi, runtime
from hollowscale.draplugin.inventory import fake_inventory
from hollowscale.draplugin.prepare import prepare_claim

KIND = "k8s.gpu.nvidia.com/claim"


def _spec(name: str = "u1-gpu-0", env: list[str] | None = None, **edits: Any) -> dict[str, Any]:
    return {"cdiVersion": "0.5.0", "kind": KIND,
            "devices": [{"name": name, "containerEdits": {"env": env or ["A=1"], **edits}}]}


def _fake_stat(mode: int, major: int, minor: int) -> Any:
    return lambda path: SimpleNamespace(st_mode=mode, st_rdev=os.makedev(major, minor))


def test_spec_files_are_written_found_and_removed(tmp_path: Path) -> None:
    path = cdi.write_spec(tmp_path / "cdi", "u1", _spec())
    assert path == tmp_path / "cdi" / "k8s.gpu.nvidia.com-claim_u1.json"
    (tmp_path / "cdi" / "junk.json").write_text("not json")
    (tmp_path / "cdi" / "other.json").write_text(json.dumps({"hello": 1}))
    assert list(cdi.load_specs(tmp_path / "cdi")) == [path.name]
    cdi.remove_spec(tmp_path / "cdi", KIND, "u1")
    cdi.remove_spec(tmp_path / "cdi", KIND, "u1")  # twice: no error
    assert cdi.load_specs(tmp_path / "cdi") == {}
    assert cdi.load_specs(tmp_path / "absent") == {}


def test_resolve_keeps_the_order_and_names_what_is_missing() -> None:
    specs = {"a.json": {**_spec("d1", ["X=1"]), "containerEdits": {"env": ["COMMON=1"]}},
             "b.json": _spec("d2", ["Y=2"])}
    edits = cdi.resolve([f"{KIND}=d2", f"{KIND}=d1", f"{KIND}=d2"], specs)
    assert [e["env"] for e in edits] == [["Y=2"], ["COMMON=1"], ["X=1"]]
    with pytest.raises(cdi.CdiError, match=f"unresolvable CDI devices {KIND}=nope"):
        cdi.resolve([f"{KIND}=d1", f"{KIND}=nope"], specs)


def test_edits_replace_variables_add_device_nodes_mounts_and_hooks() -> None:
    oci: dict[str, Any] = {"process": {"env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void"]},
                           "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}
    edits = [{"env": ["NVIDIA_VISIBLE_DEVICES=GPU-1", "HOLLOWSCALE_GPU_IDS=GPU-1"],
              "deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/host/dev/nvidia0", "permissions": "rw"}],
              "mounts": [{"hostPath": "/lib/libcuda.so.1", "containerPath": "/usr/local/nvidia/lib64/libcuda.so.1",
                          "options": ["ro", "bind"]}],
              "hooks": [{"hookName": "createContainer", "path": "/bin/true", "args": ["true"]}]}]
    cdi.apply_edits(oci, edits, stat_fn=_fake_stat(stat.S_IFCHR | 0o666, 195, 0))
    assert oci["process"]["env"] == ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1", "HOLLOWSCALE_GPU_IDS=GPU-1"]
    assert oci["linux"]["devices"] == [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0,
                                        "fileMode": 0o666, "uid": 0, "gid": 0}]
    assert oci["linux"]["resources"]["devices"][-1] == {"allow": True, "type": "c", "major": 195, "minor": 0,
                                                         "access": "rw"}
    assert oci["mounts"] == [{"destination": "/usr/local/nvidia/lib64/libcuda.so.1", "source": "/lib/libcuda.so.1",
                              "type": "bind", "options": ["ro", "bind"]}]
    assert oci["hooks"] == {"createContainer": [{"path": "/bin/true", "args": ["true"]}]}


def test_a_device_node_that_is_no_device_and_a_bad_hook_are_refused() -> None:
    with pytest.raises(cdi.CdiError, match="is not a device"):
        cdi.apply_edits({}, [{"deviceNodes": [{"path": "/dev/x"}]}], stat_fn=_fake_stat(stat.S_IFREG, 0, 0))
    with pytest.raises(cdi.CdiError, match="hookName must be one of"):
        cdi.apply_edits({}, [{"hooks": [{"hookName": "whenever", "path": "/bin/true"}]}])


def test_runc_arguments_give_the_bundle_and_log() -> None:
    args = ["--root", "/run/r", "--log", "/b/log.json", "--log-format", "json", "create", "--bundle", "/b",
            "--pid-file", "/b/init.pid", "abc123"]
    assert runtime.parse_runc_args(args) == (Path("/b"), Path("/b/log.json"))
    assert runtime.parse_runc_args(["--log=/l", "create", "--bundle=/x", "id"]) == (Path("/x"), Path("/l"))
    assert runtime.parse_runc_args(["create", "-b", "/y", "id"])[0] == Path("/y")


def _bundle(tmp_path: Path, container_type: str = "container") -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(json.dumps({
        "process": {"env": ["PATH=/bin"]},
        "annotations": {runtime.CONTAINER_TYPE: container_type, runtime.SANDBOX_NAMESPACE: "team-a",
                        runtime.SANDBOX_NAME: "trainer", runtime.CONTAINER_NAME: "main"}}))
    return bundle


def test_create_applies_the_devices_the_kubelet_lists_for_the_container(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole create path: the plugin's prepared claim -> its CDI spec -> the container's config.json."""
    inv = fake_inventory("hs-real-0", 1, GpuSpec(expose="dra"))
    claim = {"metadata": {"name": "c", "namespace": "team-a", "uid": "u1"},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "hs-real-0", "device": "gpu-0"}]}}}}
    prepared = prepare_claim(claim, "u1", node="hs-real-0", inventory=inv)
    assert prepared.cdi_spec is not None
    cdi.write_spec(tmp_path / "cdi", "u1", prepared.cdi_spec)
    asked: list[tuple[str, str, str]] = []

    def kubelet(root: Path, ns: str, pod: str, container: str) -> list[str]:
        asked.append((ns, pod, container))
        return list(prepared.devices[0].cdi_ids)

    monkeypatch.setattr(runtime, "_kubelet_devices", kubelet)
    bundle = _bundle(tmp_path)
    assert runtime.edit_bundle(bundle, tmp_path / "kubelet", tmp_path / "cdi") == list(prepared.devices[0].cdi_ids)
    assert asked == [("team-a", "trainer", "main")]
    env = json.loads((bundle / "config.json").read_text())["process"]["env"]
    assert f"NVIDIA_VISIBLE_DEVICES={inv.gpus.ids[0]}" in env and env[0] == "PATH=/bin"


def test_sandboxes_and_containers_without_devices_are_left_alone(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_kubelet_devices", lambda *a: [])
    bundle = _bundle(tmp_path)
    before = (bundle / "config.json").read_text()
    assert runtime.edit_bundle(bundle, tmp_path, tmp_path / "cdi") == []
    assert (bundle / "config.json").read_text() == before

    def never(*a: Any) -> list[str]:
        raise AssertionError("a sandbox must not cost a call to the kubelet")

    monkeypatch.setattr(runtime, "_kubelet_devices", never)
    assert runtime.edit_bundle(_bundle(tmp_path / "s", "sandbox"), tmp_path, tmp_path / "cdi") == []


def test_a_failed_create_says_why_in_runcs_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unresolvable device fails the create (exit 1, runc never run) with a runc-style error line."""
    monkeypatch.setattr(runtime, "_kubelet_devices", lambda *a: [f"{KIND}=gone"])
    bundle = _bundle(tmp_path)
    log = tmp_path / "log.json"
    monkeypatch.setattr(runtime.os, "execv", lambda *a: pytest.fail("runc must not run"))
    code = runtime.main(["--runc", "/usr/sbin/runc", "--kubelet-root", str(tmp_path), "--cdi-dir",
                         str(tmp_path / "cdi"), "--", "--log", str(log), "create", "--bundle", str(bundle), "id"])
    assert code == 1
    line = json.loads(log.read_text().splitlines()[-1])
    assert line["level"] == "error" and f"unresolvable CDI devices {KIND}=gone" in line["msg"]
    assert runtime.main(["--runc", "/usr/sbin/runc"]) == 2
