"""Fake GPUs on a kind cluster's workers: hollowscale's device plugin, run on this machine, one per worker.

A kind worker is a container, and its kubelet watches ``/var/lib/kubelet/plugins_registry`` inside it.
Each worker gets that folder mounted from a folder of this machine made for the run
(:meth:`FakeGpuPlugins.worker_mounts`, given to kind at creation), and one ``python -m
hollowscale.deviceplugin`` per worker serves its socket there, handing the kubelet the socket's path as the
kubelet sees it (``--kubelet-sees-root /var/lib/kubelet``).  The kubelet's plugin watcher registers it as
it would a plugin running inside the node (a unix socket is one inode on both sides of a bind mount), and
the worker advertises ``nvidia.com/gpu``, as the local cluster's real nodes do with the same plugin.

Nothing here needs a GPU.  What does (the NVIDIA container toolkit inside the node, NVIDIA's own device
plugin, containers that see ``/dev/nvidia*``) is described in ``kind-config-gpu.yaml`` and not run here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hollowscale.paths import short_temp_dir

#: the kubelet's --root-dir inside a kind node (kind's kubeadm config keeps the kubelet's default)
KUBELET_ROOT_IN_NODE = "/var/lib/kubelet"
REGISTRY = "plugins_registry"


class FakeGpuPlugins:
    """The device plugins of one kind cluster's workers: their folders, their processes.

    The folders are under a short folder in ``/tmp`` (unix socket paths are limited to 107 bytes), made
    here and removed by :meth:`stop` with everything in it.
    """

    def __init__(self, count: int, model: str, log_dir: Path) -> None:
        self.count = count
        self.model = model
        self.log_dir = log_dir
        self.base = short_temp_dir("hs-kindgpu-")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def root(self, index: int) -> Path:
        """The plugin's --kubelet-root for the ``index``-th worker (its registry is mounted into the node)."""
        return self.base / f"w{index}"

    def worker_mounts(self, index: int) -> list[dict[str, Any]]:
        """What the ``index``-th worker mounts (kind ``extraMounts``): its registry folder (made now) at the
        kubelet's, read-write (the kubelet and the plugin both make sockets there)."""
        registry = self.root(index) / REGISTRY
        registry.mkdir(parents=True, exist_ok=True)
        return [{"hostPath": str(registry), "containerPath": f"{KUBELET_ROOT_IN_NODE}/{REGISTRY}"}]

    def argv(self, index: int, node: str) -> list[str]:
        return [sys.executable, "-m", "hollowscale.deviceplugin", "--kubelet-root", str(self.root(index)),
                "--kubelet-sees-root", KUBELET_ROOT_IN_NODE, "--node", node, "--fake-gpus", str(self.count),
                "--gpu-model", self.model]

    def start(self, workers: Sequence[str]) -> dict[str, int]:
        """One plugin per worker (``workers``: their names in config order); name -> pid."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for index, node in enumerate(workers, 1):
            with (self.log_dir / f"deviceplugin-{node}.log").open("ab") as out:
                self.procs[node] = subprocess.Popen(self.argv(index, node), stdout=out, stderr=subprocess.STDOUT,
                                                    stdin=subprocess.DEVNULL)
        return {f"deviceplugin-{node}": p.pid for node, p in self.procs.items()}

    def exited(self) -> dict[str, int]:
        """Plugins that stopped on their own: node -> exit code."""
        return {node: code for node, p in self.procs.items() if (code := p.poll()) is not None}

    def stop(self) -> None:
        """Stop the plugins (each removes its socket) and remove the folders."""
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        shutil.rmtree(self.base, ignore_errors=True)


__all__ = ["KUBELET_ROOT_IN_NODE", "FakeGpuPlugins"]
