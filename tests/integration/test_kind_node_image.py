"""The kind node image built here (hollowscale/kindnode) boots as kind's podman provider runs a node: systemd
as PID 1, containerd up, the images kubeadm runs imported, and a container of them runs inside the node.
Everything the test made (container, volume, the loaded image unless it was there before) is removed."""

from __future__ import annotations

import time
import uuid

import psutil
import pytest

from hollowscale.kindnode.engine import ensure_podman, load_image
from hollowscale.kindnode.image import ETCD_TAG, build_node_image
from hollowscale.versions import KUBERNETES_VERSION

# builds the node image (debootstrap from the Debian archive: ~2 minutes cold) and boots it: make test-e2e
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]


def test_the_node_image_boots_with_kinds_podman_flags() -> None:
    built = build_node_image()
    again = build_node_image()
    assert again.cached and again.image.archive == built.image.archive  # cached by content: nothing rebuilt
    podman = ensure_podman()
    name = built.image.name
    had_image = podman.run(["image", "exists", name], check=False).returncode == 0
    node, volume = f"hs-test-{uuid.uuid4().hex[:8]}", f"hs-test-var-{uuid.uuid4().hex[:8]}"
    try:
        load_image(podman, name, built.image.digest, built.image.archive)  # a rebuild with the same name reloads
        podman.run(["volume", "create", volume])
        # kind v0.33.0's podman provider (pkg/cluster/internal/providers/podman/provision.go), without a network
        podman.run(["run", "--detach", "--tty", "--name", node, "--hostname", node, "--net", "none",
                    "-e", "container=podman", "--cgroupns=private", "--privileged", "--tmpfs", "/tmp",
                    "--tmpfs", "/run", "--volume", f"{volume}:/var:suid,exec,dev", name])
        state = ""
        deadline = time.monotonic() + 120
        while state not in ("running", "degraded") and time.monotonic() < deadline:
            state = podman.run(["exec", node, "systemctl", "is-system-running"], check=False).stdout.strip()
            time.sleep(0.5)
        assert state == "running", podman.run(["exec", node, "systemctl", "--failed"], check=False).stdout
        assert podman.run(["exec", node, "cat", "/proc/1/comm"]).stdout.strip() == "systemd"
        active = podman.run(["exec", node, "systemctl", "is-active", "containerd", "hollowscale-import-images"],
                            check=False).stdout.split()
        assert active == ["active", "active"]
        images = set(podman.run(["exec", node, "ctr", "-n", "k8s.io", "images", "ls", "-q"]).stdout.split())
        assert {c.name for c in built.components} <= images
        assert podman.run(["exec", node, "kubeadm", "version", "-o", "short"]).stdout.strip() == KUBERNETES_VERSION
        assert podman.run(["exec", node, "cat", "/kind/version"]).stdout.strip() == KUBERNETES_VERSION
        # a container inside the node: containerd, runc and overlayfs on the node's /var volume
        inner = podman.run(["exec", node, "ctr", "-n", "k8s.io", "run", "--rm", f"registry.k8s.io/etcd:{ETCD_TAG}",
                            "inner", "/usr/local/bin/etcd", "--version"], timeout_s=120).stdout
        assert "etcd Version: " + ETCD_TAG.removesuffix("-0") in inner
    finally:
        podman.run(["rm", "--force", "--volumes", node], check=False, timeout_s=120)
        podman.run(["volume", "rm", "--force", volume], check=False)
        if not had_image:
            podman.run(["rmi", name], check=False)
    left = podman.run(["ps", "--all", "--quiet", "--filter", f"name={node}"]).stdout.strip()
    assert not left and podman.run(["volume", "exists", volume], check=False).returncode != 0
    assert not [p for p in psutil.process_iter(["name", "cmdline"]) if node in " ".join(p.info["cmdline"] or ())]
