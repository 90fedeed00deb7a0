"""Real nodes: configuration, layout and bookkeeping that need no root and start nothing."""

from __future__ import annotations

import ipaddress
import os
import sys
import tomllib
from pathlib import Path

import pytest

from hollowscale.cluster import binaries as bins_mod
from hollowscale.cluster.components import deviceplugin, kubelet
from hollowscale.cluster.realnode import (
    NODE_KIND_LABEL,
    TAINT_KEY,
    NodeLayout,
    PodNetwork,
    RealNodeSettings,
    pod_placement,
    render,
)
from hollowscale.cluster.realnode import pool as pool_mod
from hollowscale.cluster.realnode import teardown as teardown_mod
from hollowscale.cluster.realnode.layout import bridge_name, pick_pod_cidr

NET = PodNetwork(bridge="hsbr-0123abcd", cidr="10.89.0.0/16")


def layout(tmp_path: Path, index: int = 0) -> NodeLayout:
    return NodeLayout(tmp_path / "cluster", index)


def test_containerd_config_is_valid_toml_with_the_settings_this_machine_needs(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    doc = tomllib.loads(render.containerd_config(lay, "hollowscale.local/pause:3.10"))
    assert doc["version"] == 2
    assert doc["root"] == str(lay.containerd_root) and doc["state"] == str(lay.containerd_state)
    assert doc["grpc"]["address"] == str(lay.containerd_socket)
    assert doc["ttrpc"]["address"] == "" and doc["metrics"]["address"] == ""
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "hollowscale.local/pause:3.10"
    assert cri["restrict_oom_score_adj"] is True and cri["disable_apparmor"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["cni"]["conf_dir"] == str(lay.cni_conf_dir) and cri["cni"]["bin_dir"] == "/usr/lib/cni"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["containerd"]["runtimes"]["runc"]["options"]["Root"].startswith(str(lay.containerd_state))
    # nothing of containerd's defaults outside the node dir
    assert doc["plugins"]["io.containerd.internal.v1.opt"]["path"].startswith(str(lay.base))


def test_cni_conflist_keeps_traffic_on_the_bridge(tmp_path: Path) -> None:
    conf = render.cni_conflist(layout(tmp_path, 2), NET)
    assert conf["name"] == "hollowscale-0123abcd"  # per cluster, like the bridge: its libcni cache is ours
    (bridge,) = conf["plugins"]
    assert bridge["type"] == "bridge" and bridge["bridge"] == NET.bridge
    assert bridge["ipMasq"] is False and bridge["isGateway"] is False and bridge["isDefaultGateway"] is False
    ipam = bridge["ipam"]
    assert ipam["routes"] == []  # no default route: nothing can leave the machine
    assert ipam["dataDir"] == str(layout(tmp_path, 2).cni_ipam_dir)
    (rng,) = ipam["ranges"][0]
    assert (rng["subnet"], rng["rangeStart"], rng["rangeEnd"], rng["gateway"]) == (
        "10.89.0.0/16", "10.89.3.1", "10.89.3.254", "10.89.0.1")
    assert not any(p["type"] == "portmap" for p in conf["plugins"])


def test_node_ranges_are_disjoint_and_inside_the_network() -> None:
    net = ipaddress.ip_network(NET.cidr)
    seen: set[ipaddress.IPv4Address] = set()
    for i in range(250):
        start, end = (ipaddress.IPv4Address(a) for a in NET.node_range(i))
        assert start in net and end in net and start <= end
        assert int(ipaddress.IPv4Address(NET.gateway)) not in range(int(start), int(end) + 1)
        span = {ipaddress.IPv4Address(a) for a in range(int(start), int(end) + 1)}
        assert not span & seen
        seen |= span


def test_kubelet_config_and_argv(tmp_path: Path) -> None:
    lay = layout(tmp_path, 1)
    cfg = render.kubelet_config(lay, NET, Path("/ca.crt"), (Path("/s.crt"), Path("/s.key")), 10250, 10248,
                                RealNodeSettings(max_pods=30))
    for key, value in {"cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
                       "cgroupsPerQOS": False, "enforceNodeAllocatable": [], "localStorageCapacityIsolation": False,
                       "evictionHard": {}, "makeIPTablesUtilChains": False, "readOnlyPort": 0,
                       "address": "10.89.0.1", "port": 10250, "healthzPort": 10248, "maxPods": 30}.items():
        assert cfg[key] == value, key
    assert cfg["containerRuntimeEndpoint"] == f"unix://{lay.containerd_socket}"
    assert cfg["authentication"]["anonymous"]["enabled"] is False
    assert cfg["authorization"]["mode"] == "Webhook"
    assert cfg["registerWithTaints"] == [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
    assert cfg["podLogsDir"].startswith(str(lay.base)) and cfg["volumePluginDir"].startswith(str(lay.base))
    argv = kubelet.argv(Path("/bin/kubelet"), lay, NET)
    assert f"--hostname-override={lay.name}" in argv and "--node-ip=10.89.0.1" in argv
    assert f"--root-dir={lay.kubelet_root}" in argv
    assert f"--node-labels={NODE_KIND_LABEL}=real" in argv


def test_deviceplugin_argv_is_the_hook_h3_implements(tmp_path: Path) -> None:
    lay = layout(tmp_path, 3)
    argv = deviceplugin.argv(lay, RealNodeSettings(fake_gpus=4, gpu_model="H100"))
    assert argv == [sys.executable, "-m", "hollowscale.deviceplugin", "--kubelet-root", str(lay.kubelet_root),
                    "--node", "hs-real-3", "--fake-gpus", "4", "--gpu-model", "H100"]
    assert lay.plugins_registry == lay.kubelet_root / "plugins_registry"


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="count"):
        RealNodeSettings(count=-1)
    with pytest.raises(ValueError, match="fake_gpus"):
        RealNodeSettings(fake_gpus=-2)
    with pytest.raises(ValueError, match="choose one"):
        RealNodeSettings(fake_gpus=2, dra_gpus=2)


def test_a_dra_node_runs_runc_through_the_cdi_wrapper(tmp_path: Path) -> None:
    """containerd 1.6 has no CDI: a node with DRA GPUs gets runc's BinaryName set to the plugin's wrapper."""
    lay = layout(tmp_path)
    plain = tomllib.loads(render.containerd_config(lay, "p"))
    runc = "io.containerd.grpc.v1.cri"
    assert "BinaryName" not in plain["plugins"][runc]["containerd"]["runtimes"]["runc"]["options"]
    doc = tomllib.loads(render.containerd_config(lay, "p", lay.runc_wrapper))
    assert doc["plugins"][runc]["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == str(lay.runc_wrapper)
    assert lay.runc_wrapper.parent == lay.base / "containerd" and lay.cdi_dir == lay.base / "cdi"


def test_names_paths_and_cidr_choice(tmp_path: Path) -> None:
    a, b = bridge_name(tmp_path / "a"), bridge_name(tmp_path / "b")
    assert a != b and len(a) <= 15 and a.startswith("hsbr-")
    assert pick_pod_cidr([]) == "10.88.0.0/16"
    assert pick_pod_cidr(["10.88.0.0/16", "10.89.3.0/24", "192.0.2.0/24"]) == "10.90.0.0/16"
    with pytest.raises(RuntimeError, match="no free /16"):
        pick_pod_cidr(["10.0.0.0/8"])
    with pytest.raises(ValueError, match="too long for a unix socket"):
        NodeLayout(tmp_path / ("x" * 90), 0).check()


def test_pod_placement_selects_and_tolerates() -> None:
    spec = pod_placement("hs-real-1")
    assert spec["nodeSelector"] == {NODE_KIND_LABEL: "real", "kubernetes.io/hostname": "hs-real-1"}
    assert spec["tolerations"][0]["key"] == TAINT_KEY and spec["tolerations"][0]["effect"] == "NoSchedule"


def test_mountinfo_escapes_are_decoded() -> None:
    assert teardown_mod._unescape(r"/tmp/a\040b\011c") == "/tmp/a b\tc"


def test_node_layouts_found_from_dirs(tmp_path: Path) -> None:
    for name in ("hs-real-0", "hs-real-2", "hs-real-x", "images"):
        (tmp_path / "real" / name).mkdir(parents=True)
    assert [n.name for n in teardown_mod.node_layouts(tmp_path)] == ["hs-real-0", "hs-real-2"]


def test_check_can_run_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pool_mod.RealNodeError, match="need root"):
        pool_mod.check_can_run(tmp_path / "kubelet")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(pool_mod.RealNodeError, match=r"missing binary .*kubelet.*make setup-test"):
        pool_mod.check_can_run(tmp_path / "kubelet")
    kubelet = tmp_path / "kubelet"
    kubelet.write_text("#!/bin/sh\n")
    kubelet.chmod(0o755)
    monkeypatch.setattr(pool_mod, "REQUIREMENTS", (("runc", "runc-not-here-xyz", "runc"),))
    with pytest.raises(pool_mod.RealNodeError, match="Debian package runc"):
        pool_mod.check_can_run(kubelet)


def test_kubelet_is_cached_beside_the_control_plane_without_rebuilding_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    kube_dir = bins_mod.binaries(tmp_path).kube_apiserver.parent
    kube_dir.mkdir(parents=True)
    assert bins_mod.kubelet_binary(tmp_path) == kube_dir / "kubelet"
    built: list[list[str]] = []

    def fake_build(final_dir: Path, gomod: str, packages: list[str], ldflags: str, what: str, progress: object,
                   rename: object = None) -> None:
        built.append(packages)
        final_dir.mkdir(parents=True)
        for pkg in packages:
            out = final_dir / pkg.rsplit("/", 1)[1]
            out.write_text("binary")
            out.chmod(0o755)
        (final_dir / "BUILD-INFO.json").write_text("{}")

    monkeypatch.setattr(bins_mod, "_build_into", fake_build)
    monkeypatch.setattr(bins_mod, "_kubernetes_gomod", lambda: "module k8s.io/kubernetes\n\tk8s.io/api v0.0.0\n")
    (kube_dir / "kube-apiserver").write_text("cached")
    assert bins_mod.ensure_kubelet(root=tmp_path) == kube_dir / "kubelet"
    assert built == [["k8s.io/kubernetes/cmd/kubelet"]]
    assert (kube_dir / "kube-apiserver").read_text() == "cached"  # the control plane was not touched
    assert (kube_dir / "BUILD-INFO-kubelet.json").exists()
    assert bins_mod.ensure_kubelet(root=tmp_path) == kube_dir / "kubelet"
    assert len(built) == 1  # cached: no second build


def test_cni_cache_entries_are_only_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teardown_mod, "CNI_CACHE", tmp_path)
    for name in ("hollowscale-0123abcd-aaa-eth0", "cni-loopback-aaa-lo", "cni-loopback-bbb-lo",
                 "hollowscale-99999999-bbb-eth0", "other-net-ccc-eth0"):
        (tmp_path / name).write_text("{}")
    got = teardown_mod.cni_cache_entries(NET.cni_name, {"aaa"})
    assert [p.name for p in got] == ["cni-loopback-aaa-lo", "hollowscale-0123abcd-aaa-eth0"]


def test_shim_socket_path_is_containerds() -> None:
    """The socket of a shim, as containerd 1.6 names it (observed on this machine for a sandbox)."""
    lay = NodeLayout(Path("/tmp/pytest-of-root/pytest-190/cluster0/cp"), 0)
    task = "90c4b9ea37cc423148c6f0906127019e354612570af71637b0040974057400fc"
    assert teardown_mod.shim_socket(lay, task) == Path(
        "/run/containerd/s/924358061002cfb134aa5935b3f5019e1e7518cb4cba0e762bad2fcbd8e00731")


def test_host_claims_restore_shared_state_when_the_last_cluster_leaves(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from hollowscale.cluster.realnode import host

    monkeypatch.setattr(host, "CLAIM_DIR", tmp_path / "run")
    monkeypatch.setattr(host, "CLAIM_FILE", tmp_path / "run" / "realnodes.json")
    shared = (tmp_path / "var-lib-kubelet", tmp_path / "existing")
    shared[1].mkdir()
    monkeypatch.setattr(host, "SHARED_PATHS", shared)
    monkeypatch.setattr(host, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(host, "SYSCTLS", ())
    monkeypatch.setattr(host, "machine_networks", lambda: ["10.88.5.0/24", "192.0.2.0/24"])
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert host.claim(a, "hsbr-a") == "10.89.0.0/16"  # 10.88/16 overlaps a route of the machine
    assert host.claim(a, "hsbr-a") == "10.89.0.0/16"  # idempotent
    shared[0].mkdir()  # what the kubelet creates
    assert host.claim(b, "hsbr-b") == "10.90.0.0/16"  # not another running cluster's
    assert set(host.claimants()) == {str(a), str(b)}
    assert host.release(a) == []  # b still uses the shared paths
    assert shared[0].exists()
    assert host.release(b) == [f"removed {shared[0]}"]
    assert not shared[0].exists() and shared[1].exists()  # only what was absent at the first claim
    assert not host.CLAIM_FILE.exists() and not host.CLAIM_DIR.exists()


def test_a_crashed_claimant_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hollowscale.cluster.realnode import host

    monkeypatch.setattr(host, "CLAIM_DIR", tmp_path / "run")
    monkeypatch.setattr(host, "CLAIM_FILE", tmp_path / "run" / "realnodes.json")
    monkeypatch.setattr(host, "SHARED_PATHS", ())
    monkeypatch.setattr(host, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(host, "SYSCTLS", ())
    monkeypatch.setattr(host, "machine_networks", lambda: [])
    gone, alive = tmp_path / "gone", tmp_path / "alive"
    gone.mkdir()
    alive.mkdir()
    host.claim(gone, "hsbr-g")
    gone.rmdir()  # its session died and its dir was removed without `down`
    assert host.claim(alive, "hsbr-l") == "10.88.0.0/16"  # its /16 is free again
    assert set(host.claimants()) == {str(alive)}


def test_apiserver_reaches_kubelets_with_its_own_client_certificate(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    from hollowscale.cluster.components import apiserver
    from hollowscale.cluster.local import LocalCluster
    from hollowscale.cluster.pki import create_pki

    pki = create_pki(tmp_path / "pki")
    argv = apiserver.argv(LocalCluster(tmp_path)._apiserver(pki, {"etcd": 1, "kube-apiserver": 2}))
    assert f"--kubelet-client-certificate={pki.apiserver_kubelet_client.cert}" in argv
    assert f"--kubelet-certificate-authority={pki.ca.cert}" in argv
    assert any(a.startswith("--kubelet-preferred-address-types=InternalIP,") for a in argv)
    cert = x509.load_pem_x509_certificate(pki.apiserver_kubelet_client.cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"


def test_cluster_info_lists_real_nodes(tmp_path: Path) -> None:
    import json

    from hollowscale.cluster.local import LocalCluster

    node = {"name": "hs-real-0", "index": 0, "kubelet_port": 40001, "healthz_port": 40002, "root_dir": "/r",
            "containerd_socket": "/s.sock", "pod_range": "10.88.1.1-10.88.1.254", "fake_gpus": 2,
            "gpu_model": "fake-gpu", "components": ["hs-real-0-containerd", "hs-real-0-kubelet"]}
    state = {"profile": "default", "complete": True, "ports": {"kube-apiserver": 1, "kube-controller-manager": 2,
                                                               "kube-scheduler": 3, "etcd-metrics": 4},
             "real_nodes": {"network": {"bridge": "hsbr-1", "cidr": "10.88.0.0/16", "gateway": "10.88.0.1"},
                            "nodes": [node]}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    info = LocalCluster(tmp_path).info()
    assert info is not None
    assert [(n.name, n.kubelet_port, n.containerd_socket, n.fake_gpus) for n in info.real_nodes] == [
        ("hs-real-0", 40001, "/s.sock", 2)]
    assert info.pod_network == {"bridge": "hsbr-1", "cidr": "10.88.0.0/16", "gateway": "10.88.0.1"}
