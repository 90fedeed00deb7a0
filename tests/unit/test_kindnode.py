"""The kind node image's parts that need no build (hollowscale/kindnode): podman's configuration, the Debian
tree as layer entries, kind's files with our changes, the image's name and the kubeadm patch."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from hollowscale.images.layout import LayoutError
from hollowscale.kindnode import engine, files, firewall, image, rootfs
from hollowscale.versions import COREDNS_VERSION, ETCD_VERSION, KUBERNETES_VERSION

LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max processes             96555                96555                processes
Max open files            1024                 20000                files
"""


def test_hard_limits_are_read_from_proc_limits() -> None:
    assert engine.hard_limits(LIMITS) == (20000, 96555)
    assert engine.hard_limits(LIMITS.replace("96555                processes", "unlimited   processes")) == \
        (20000, 1 << 30)
    with pytest.raises(engine.EngineError, match="limits"):
        engine.hard_limits("Max cpu time unlimited unlimited seconds\n")


def test_containers_conf_keeps_podman_inside_its_folder_and_within_our_limits(tmp_path: Path) -> None:
    text = engine.containers_conf(tmp_path, 20000, 96555)
    assert 'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]' in text  # nproc capped at conmon's
    assert f'conmon_path = ["{tmp_path}/usr/bin/conmon"]' in text and 'cgroup_manager = "cgroupfs"' in text
    assert f'runc = ["{engine.RUNC}"]' in text and 'network_backend = "netavark"' in text
    assert f'helper_binaries_dir = ["{tmp_path}/usr/lib/podman"]' in text
    assert engine.containers_conf(tmp_path, 1024, 4096).count("nproc=4096:4096") == 1
    storage = engine.storage_conf(tmp_path)
    assert f'graphroot = "{tmp_path}/state/storage"' in storage and "/var/lib/containers" not in storage


def test_the_podman_wrapper_sets_its_private_environment(tmp_path: Path) -> None:
    podman = engine.Podman(tmp_path)
    env = podman.env()
    assert env["CONTAINERS_CONF"] == str(tmp_path / "conf" / "containers.conf")
    assert env["HOME"] == str(tmp_path / "home")  # where podman reads its image policy from
    kind_env = podman.kind_env({"PATH": "/usr/bin"})
    assert kind_env["PATH"] == f"{tmp_path / 'bin'}:/usr/bin" and kind_env["KIND_EXPERIMENTAL_PROVIDER"] == "podman"


def _tree(root: Path) -> None:
    (root / "usr" / "lib" / "systemd").mkdir(parents=True)
    (root / "usr" / "lib" / "systemd" / "systemd").write_text("#!/bin/sh\n")
    (root / "usr" / "bin").mkdir()
    su = root / "usr" / "bin" / "su"
    su.write_text("x")
    su.chmod(0o4755)
    os.link(su, root / "usr" / "bin" / "su-hardlink")
    (root / "bin").symlink_to("usr/bin")
    (root / "dev").mkdir()
    os.mkfifo(root / "usr" / "bin" / "a-fifo")
    (root / "dev" / "null-ish").write_text("")
    (root / "var" / "lib" / "apt" / "lists").mkdir(parents=True)
    (root / "var" / "lib" / "apt" / "lists" / "index").write_text("big")
    (root / "var" / "tmp").mkdir()
    (root / "var" / "tmp").chmod(0o1777)


def test_tree_entries_keep_modes_links_and_skip_what_the_runtime_fills(tmp_path: Path) -> None:
    _tree(tmp_path)
    by = {e.path: e for e in rootfs.tree_entries(tmp_path)}
    assert by["usr/bin/su"].mode == 0o4755 and by["usr/bin/su-hardlink"].kind == "file"  # a hard link: a copy
    assert by["bin"].kind == "symlink" and by["bin"].target == "usr/bin"
    assert "usr/bin/a-fifo" not in by  # no fifos, sockets or devices
    assert by["dev"].kind == "dir" and "dev/null-ish" not in by  # the folder stays, empty
    assert by["var/lib/apt/lists"].kind == "dir" and "var/lib/apt/lists/index" not in by
    assert by["var/tmp"].mode == 0o1777
    assert not any(p.startswith("bin/") for p in by)  # never into a symlinked folder
    (tmp_path / "usr" / "lib" / "systemd" / "systemd").unlink()
    with pytest.raises(LayoutError, match="not a node root filesystem"):
        rootfs.tree_entries(tmp_path)


def test_clean_up_does_what_kinds_dockerfile_does(tmp_path: Path) -> None:
    lib = tmp_path / "lib" / "systemd" / "system"
    for wants, unit in (("multi-user.target.wants", "ssh.service"), ("sysinit.target.wants",
                                                                      "systemd-tmpfiles-setup.service"),
                        ("sysinit.target.wants", "keep.service"), ("sockets.target.wants", "systemd-udevd.socket")):
        (lib / wants).mkdir(parents=True, exist_ok=True)
        (lib / wants / unit).symlink_to(f"/lib/systemd/system/{unit}")
    (tmp_path / "etc" / "systemd" / "system" / "timers.target.wants").mkdir(parents=True)
    (tmp_path / "etc" / "systemd" / "system" / "timers.target.wants" / "apt.timer").symlink_to("/x")
    (tmp_path / "etc" / "systemd" / "journald.conf").write_text("[Journal]\n")
    (tmp_path / "sbin").mkdir()
    (tmp_path / "etc" / "machine-id").write_text("abc\n")
    rootfs.clean_up(tmp_path)
    assert [p.name for p in (lib / "sysinit.target.wants").iterdir()] == ["keep.service"]
    assert not list((lib / "multi-user.target.wants").iterdir()) and not list((lib / "sockets.target.wants").iterdir())
    assert not list((tmp_path / "etc" / "systemd" / "system" / "timers.target.wants").iterdir())
    assert "ReadKMsg=no" in (tmp_path / "etc" / "systemd" / "journald.conf").read_text()
    assert os.readlink(tmp_path / "sbin" / "init") == "/usr/lib/systemd/systemd"
    assert os.readlink(tmp_path / "etc" / "systemd" / "system" / "systemd-binfmt.service") == "/dev/null"
    assert (tmp_path / "etc" / "machine-id").read_text() == ""


def test_the_rootfs_fingerprint_follows_the_package_list() -> None:
    assert rootfs.rootfs_fingerprint(("a", "b")) == rootfs.rootfs_fingerprint(("b", "a"))
    assert rootfs.rootfs_fingerprint(("a",)) != rootfs.rootfs_fingerprint(("a", "b"))


KIND_CONTAINERD = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = false
"""
KIND_UNIT = """[Service]
ExecStart=/usr/local/bin/containerd
LimitNPROC=infinity
LimitNOFILE=infinity
OOMScoreAdjust=-999
Delegate=yes
"""


def _kind_module(root: Path) -> Path:
    base = root / "images" / "base" / "files"
    for rel, text in (("usr/local/bin/entrypoint", "#!/bin/bash\n"), ("kind/bin/undo-mount-hacks.sh", "#!/bin/sh\n"),
                      ("kind/README.txt", "reserved\n"), ("etc/containerd/config.toml", KIND_CONTAINERD),
                      ("etc/systemd/system/containerd.service", KIND_UNIT),
                      ("etc/systemd/system/kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet\n")):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return root


def test_kind_files_get_kinds_modes_and_our_changes(tmp_path: Path) -> None:
    by = {e.path: e for e in files.kind_files(_kind_module(tmp_path))}
    assert by["usr/local/bin/entrypoint"].mode == 0o755 and by["kind/bin/undo-mount-hacks.sh"].mode == 0o755
    assert by["kind/README.txt"].mode == 0o644 and by["etc/systemd/system/kubelet.service"].mode == 0o644
    config = (by["etc/containerd/config.toml"].data or b"").decode()
    assert "restrict_oom_score_adj = true" in config and "disable_apparmor = true" in config
    unit = (by["etc/systemd/system/containerd.service"].data or b"").decode()
    assert "Limit" not in unit.split("#")[0] and "OOMScoreAdjust" not in unit.split("#")[0]
    assert "Delegate=yes" in unit and "ExecStart=/usr/local/bin/containerd" in unit
    with pytest.raises(LayoutError, match="CRI section"):
        files.containerd_config("version = 2\n")
    with pytest.raises(LayoutError, match="entrypoint"):
        files.kind_files(tmp_path / "elsewhere")


def test_node_entries_add_binaries_version_images_units_and_links(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "cri_base_spec", lambda ctr="": b"{}\n")
    kubeadm = tmp_path / "kubeadm"
    kubeadm.write_text("bin")
    archive = tmp_path / "kind-etcd.tar"
    archive.write_text("tar")
    by = {e.path: e for e in files.node_entries(_kind_module(tmp_path / "kind"), {"kubeadm": kubeadm}, "v1.36.3",
                                                [("kind-etcd.tar", archive)], "registry.k8s.io/kube-proxy:v1")}
    assert by["usr/bin/kubeadm"].source == kubeadm and by["usr/bin/kubeadm"].mode == 0o755
    assert by["kind/version"].data == b"v1.36.3\n"
    assert by["kind/images/kind-etcd.tar"].source == archive
    assert by["usr/local/bin/containerd"].target == "/usr/bin/containerd"
    assert by["opt/cni/bin/ptp"].target == "/usr/lib/cni/ptp"
    for unit in files.ENABLED_UNITS:
        assert by[f"etc/systemd/system/multi-user.target.wants/{unit}"].target == f"/etc/systemd/system/{unit}"
    assert "Before=kubelet.service" in (by["etc/systemd/system/hollowscale-import-images.service"].data or b"").decode()
    dropin = (by["etc/systemd/system/kubelet.service.d/20-hollowscale-images.conf"].data or b"").decode()
    assert "Requires=hollowscale-import-images.service" in dropin
    assert yaml.safe_load(by["kind/manifests/default-storage.yaml"].data or b"")["kind"] == "StorageClass"
    cni = list(yaml.safe_load_all(by["kind/manifests/default-cni.yaml"].data or b""))
    assert [d["kind"] for d in cni] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"]
    pod = cni[4]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] and pod["containers"][0]["image"] == "registry.k8s.io/kube-proxy:v1"
    assert cni[3]["data"]["cni.sh"] == files.CNI_SCRIPT  # the script as written, through YAML
    assert stat.S_IMODE(by["kind/bin/hollowscale-import-images.sh"].mode) == 0o755


def test_the_image_name_says_what_it_holds_and_kubeadm_runs_our_tags() -> None:
    name = image.node_image_name()
    assert name.startswith("localhost/hollowscale/kind-node:")  # podman and kind keep a localhost name local
    tag = name.rsplit(":", 1)[1]
    assert KUBERNETES_VERSION in tag and ETCD_VERSION.removeprefix("v") in tag
    assert COREDNS_VERSION.removeprefix("v") in tag
    patch = yaml.safe_load(image.kubeadm_image_patch())
    assert patch == {"kind": "ClusterConfiguration", "etcd": {"local": {"imageTag": image.ETCD_TAG}},
                     "dns": {"imageTag": image.COREDNS_TAG}}
    assert ETCD_VERSION.removeprefix("v") + "-0" == image.ETCD_TAG


SAVE_BEFORE = """# Generated by iptables-save v1.8.9 on Sat Dec  5 21:00:00 2026
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:CNI-FORWARD - [0:0]
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
COMMIT
"""
SAVE_AFTER = SAVE_BEFORE.replace(
    '-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD\n',
    ':NETAVARK_FORWARD - [0:0]\n-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD\n'
    '-A FORWARD -m comment --comment "netavark firewall plugin rules" -j NETAVARK_FORWARD\n'
    '-A NETAVARK_FORWARD -d 10.89.0.0/24 -j ACCEPT\n').replace(
    ":POSTROUTING ACCEPT [0:0]\n",
    ":POSTROUTING ACCEPT [0:0]\n:NETAVARK-HOSTPORT-MASQ - [0:0]\n:MINE - [0:0]\n-A POSTROUTING -j NETAVARK-HOSTPORT-MASQ\n"
    "-A POSTROUTING -j MINE\n")


def test_the_firewall_cleanup_removes_only_the_backends_new_chains() -> None:
    before, after = firewall.parse_save(SAVE_BEFORE), firewall.parse_save(SAVE_AFTER)
    assert "NETAVARK_FORWARD" in after.chains["filter"] and "MINE" in after.chains["nat"]
    assert firewall.cleanup_commands(before, after) == [
        ["-t", "filter", "-D", "FORWARD", "-m", "comment", "--comment", "netavark firewall plugin rules", "-j",
         "NETAVARK_FORWARD"],
        ["-t", "filter", "-F", "NETAVARK_FORWARD"], ["-t", "filter", "-X", "NETAVARK_FORWARD"],
        ["-t", "nat", "-D", "POSTROUTING", "-j", "NETAVARK-HOSTPORT-MASQ"],
        ["-t", "nat", "-F", "NETAVARK-HOSTPORT-MASQ"], ["-t", "nat", "-X", "NETAVARK-HOSTPORT-MASQ"]]
    # the CNI chain was there before (someone else's), MINE has no backend prefix: both stay
    assert firewall.cleanup_commands(after, after) == []


def test_the_kind_config_keeps_the_users_shape_with_our_image_and_patches() -> None:
    from hollowscale.kindnode.cluster import CGROUP_V1_PATCH, METRICS_PATCH, KindConfigError, render_kind_config
    users = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
             "kubeadmConfigPatches": ["kind: ClusterConfiguration\napiServer: {}\n"],
             "nodes": [{"role": "control-plane", "image": "kindest/node:v1.36.4@sha256:abc"},
                       {"role": "worker", "labels": {"hollowscale.io/node-kind": "real"}}]}
    out = render_kind_config(users, "localhost/hollowscale/kind-node:x")
    assert [n["image"] for n in out["nodes"]] == ["localhost/hollowscale/kind-node:x"] * 2
    assert out["nodes"][1]["labels"] == {"hollowscale.io/node-kind": "real"}
    assert out["kubeadmConfigPatches"] == [*users["kubeadmConfigPatches"], CGROUP_V1_PATCH, image.kubeadm_image_patch(),
                                           METRICS_PATCH]
    assert yaml.safe_load(METRICS_PATCH) == {"kind": "ClusterConfiguration",
                                             "controllerManager": {"extraArgs": {"bind-address": "0.0.0.0"}},
                                             "scheduler": {"extraArgs": {"bind-address": "0.0.0.0"}}}
    assert users["nodes"][0]["image"].startswith("kindest/")  # the user's document is not changed
    mounted = render_kind_config({**users, "nodes": [*users["nodes"], {"role": "worker", "extraMounts": [
        {"hostPath": "/dev/null", "containerPath": "/x"}]}]}, "i",
        worker_mounts=lambda i: [{"hostPath": f"/cache/w{i}", "containerPath": "/var/lib/m", "readOnly": True}])
    assert [n.get("extraMounts") for n in mounted["nodes"]] == [
        None, [{"hostPath": "/cache/w1", "containerPath": "/var/lib/m", "readOnly": True}],
        [{"hostPath": "/dev/null", "containerPath": "/x"},
         {"hostPath": "/cache/w2", "containerPath": "/var/lib/m", "readOnly": True}]]
    assert [n["role"] for n in render_kind_config({"kind": "Cluster"}, "i")["nodes"]] == ["control-plane"]
    with pytest.raises(KindConfigError, match="exactly one control-plane"):
        render_kind_config({"kind": "Cluster", "nodes": [{"role": "control-plane"}] * 2}, "i")
    with pytest.raises(KindConfigError, match=r"x\.yaml: kind: expected Cluster"):
        render_kind_config({"kind": "Pod"}, "i", "x.yaml")


def test_host_changes_remove_only_the_modules_folder_they_made(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from hollowscale.kindnode.cluster import HostChanges
    monkeypatch.setattr(firewall, "snapshot", lambda: {})
    monkeypatch.setattr(firewall, "restore", lambda before: [])
    modules, nets, run = tmp_path / "modules", tmp_path / "nets", tmp_path / "run"
    run.mkdir()  # podman's run state there already: never ours to remove
    made = HostChanges.record(nets, modules, run)
    assert made.made_modules and modules.is_dir()
    assert made.restore(modules, run) == [f"rmdir {modules}"] and not modules.exists()
    modules.mkdir()
    there = HostChanges.record(nets, modules, run)  # it was there before: never ours to remove
    assert not there.made_modules and there.restore(modules, run) == [] and modules.is_dir()
    modules.rmdir()
    made = HostChanges.record(nets, modules, run)
    (modules / "someone-elses").write_text("")
    assert made.restore(modules, run)[0].startswith(f"left {modules}") and (modules / "someone-elses").exists()
    assert run.is_dir()


def test_kinds_node_names_in_config_order() -> None:
    from hollowscale.kindnode.cluster import node_names
    doc = {"nodes": [{"role": "control-plane"}, {"role": "worker"}, {"role": "worker"}, {"role": "worker"}]}
    assert node_names("hollowscale", doc) == ["hollowscale-control-plane", "hollowscale-worker", "hollowscale-worker2",
                                              "hollowscale-worker3"]
