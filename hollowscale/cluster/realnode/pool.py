"""Start real nodes (containerd + kubelet, optionally the fake device plugin or the DRA plugin) in a running
local cluster.

One containerd per kubelet, never one shared: a kubelet treats every pod sandbox in its runtime that it
does not know as an orphan and kills it (``HandlePodCleanups`` in ``pkg/kubelet/kubelet_pods.go``:
"Clean up containers for orphaned pod we had not seen before"), and the CRI plugin has one fixed
namespace (``k8s.io``), so two kubelets on one containerd would kill each other's pods.  Each containerd
has its own root, state, socket and CRI config; shim sockets still go to ``/run/containerd/s`` (hashed
by our socket path, so they never clash).

Every process runs under the cluster's supervisor (``hs-real-<i>-containerd``, ``-kubelet``,
``-deviceplugin``, ``-draplugin``): restarts, ``status`` and ``down`` work as for the control plane.

A node with DRA GPUs also gets the driver's DeviceClasses (:func:`hollow.dra.device_classes`, made when
absent, as the driver's installation ships them) and runs runc through the DRA plugin's CDI
wrapper (:mod:`hollowscale.draplugin.runtime`: this containerd has no CDI).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from hollow.dra import GpuSpec, device_classes
from hollowscale.cluster.components import containerd as containerd_component
from hollowscale.cluster.components import deviceplugin as deviceplugin_component
from hollowscale.cluster.components import draplugin as draplugin_component
from hollowscale.cluster.components import kubelet as kubelet_component
from hollowscale.cluster.pki import issue_cert, write_kubeconfig
from hollowscale.cluster.realnode import host, render
from hollowscale.cluster.realnode.images import PAUSE_IMAGE, build_node_images, ctr_binary, import_node_images
from hollowscale.cluster.realnode.layout import NodeLayout, PodNetwork, RealNodeInfo, RealNodeSettings, bridge_name
from hollowscale.draplugin.runtime import wrapper_script

#: what a real node needs on the machine: (what, path or command, the Debian package that has it)
REQUIREMENTS = (
    ("containerd", "containerd", "containerd"),
    ("ctr", "ctr", "containerd"),
    ("runc", "runc", "runc"),
    ("the CNI bridge plugin", str(render.CNI_BIN_DIR / "bridge"), "containernetworking-plugins"),
    ("the CNI host-local plugin", str(render.CNI_BIN_DIR / "host-local"), "containernetworking-plugins"),
    ("the CNI loopback plugin", str(render.CNI_BIN_DIR / "loopback"), "containernetworking-plugins"),
    ("ip", "ip", "iproute2"),
)
Launch = Callable[[str, list[str]], None]
ProgressFn = Callable[[str], None]


class RealNodeError(RuntimeError):
    """A real node could not be started; the message says what, where, and the fix."""


def check_can_run(kubelet: Path) -> None:
    """Root, the kubelet binary, containerd, runc, the CNI plugins: refuse with the fix when one is missing."""
    if os.geteuid() != 0:
        raise RealNodeError("real nodes need root (containerd, runc, mounts, a bridge); run as root")
    if not os.access(kubelet, os.X_OK):
        raise RealNodeError(f"missing binary {kubelet}; run `make setup-test` (or `make setup`) to build the kubelet")
    for what, cmd, package in REQUIREMENTS:
        found = os.access(cmd, os.X_OK) if cmd.startswith("/") else shutil.which(cmd) is not None
        if not found:
            raise RealNodeError(f"{what} ({cmd}) is missing: install the Debian package {package} "
                                "(`make setup-test` does)")


def ensure_network(cluster_dir: Path) -> PodNetwork:
    """Claim the host state and create the cluster's bridge (idempotent)."""
    bridge = bridge_name(cluster_dir)
    try:
        cidr = host.claim(cluster_dir, bridge)
        net = PodNetwork(bridge=bridge, cidr=cidr)
        host.create_bridge(bridge, cidr, net.gateway)
    except (host.HostError, OSError) as exc:
        raise RealNodeError(f"pod network for {cluster_dir}: {exc}") from None
    return net


def _prepare(layout: NodeLayout, net: PodNetwork, pki_dir: Path, server: str, ports: tuple[int, int],
             settings: RealNodeSettings) -> None:
    """Dirs, certificates, kubeconfig and config files of one node."""
    layout.check()
    for d in (layout.containerd_root, layout.containerd_state, layout.kubelet_root, layout.cni_conf_dir,
              layout.cni_ipam_dir, layout.pod_logs_dir):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    runc_binary = None
    if settings.dra_gpus:
        runc_binary = layout.runc_wrapper
        runc_binary.parent.mkdir(parents=True, exist_ok=True)
        runc_binary.write_text(wrapper_script(sys.executable, shutil.which("runc") or "/usr/sbin/runc",
                                              layout.kubelet_root, layout.cdi_dir))
        runc_binary.chmod(0o755)
    layout.containerd_config.write_text(render.containerd_config(layout, PAUSE_IMAGE, runc_binary))
    (layout.cni_conf_dir / "10-hollowscale.conflist").write_text(json.dumps(render.cni_conflist(layout, net),
                                                                            indent=2))
    client = issue_cert(pki_dir, f"{layout.name}-client", f"system:node:{layout.name}", "system:nodes", client=True)
    serving = issue_cert(pki_dir, f"{layout.name}-serving", f"system:node:{layout.name}", "system:nodes",
                         server=True, dns=(layout.name, "localhost"), ips=(net.gateway, "127.0.0.1"))
    write_kubeconfig(layout.kubeconfig, server, pki_dir / "ca.crt", client.cert, client.key,
                     user=f"system:node:{layout.name}")
    layout.kubelet_config.write_text(yaml.safe_dump(render.kubelet_config(
        layout, net, pki_dir / "ca.crt", (serving.cert, serving.key), ports[0], ports[1], settings), sort_keys=False))


def _wait_containerd(layout: NodeLayout, problem: Callable[[str], str | None], deadline: float) -> None:
    """Until ``ctr version`` answers on the node's socket (or its containerd exits)."""
    while True:
        why = problem(layout.component("containerd"))
        if why:
            raise RealNodeError(f"{layout.component('containerd')} {why}")
        if layout.containerd_socket.exists():
            out = subprocess.run([ctr_binary(), "--address", str(layout.containerd_socket), "version"],
                                 capture_output=True, text=True, timeout=10)
            if out.returncode == 0:
                return
        if time.monotonic() > deadline:
            raise RealNodeError(f"timed out waiting for {layout.component('containerd')} at "
                                f"{layout.containerd_socket}")
        time.sleep(0.1)


def node_ready(api: str, ctx: ssl.SSLContext, name: str) -> bool:
    """True when the Node exists and its Ready condition is True."""
    try:
        with urllib.request.urlopen(f"{api}/api/v1/nodes/{name}", timeout=2, context=ctx) as resp:
            node = json.loads(resp.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return False
    conds = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def ensure_device_classes(api: str, ctx: ssl.SSLContext, spec: GpuSpec) -> list[str]:
    """Create the DeviceClasses DRA GPUs of ``spec`` need, those that do not exist; the names made."""
    made = []
    for cls in device_classes([spec]):
        name = cls["metadata"]["name"]
        req = urllib.request.Request(f"{api}/apis/resource.k8s.io/v1/deviceclasses", data=json.dumps(cls).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx):
                made.append(name)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: it exists (a run's, or an earlier node's)
                raise RealNodeError(f"cannot create DeviceClass {name}: HTTP {exc.code} "
                                    f"{exc.read()[:300].decode(errors='replace')}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise RealNodeError(f"cannot create DeviceClass {name}: {exc}") from None
    return made


def start_nodes(cluster_dir: Path, first_index: int, settings: RealNodeSettings, *, kubelet: Path,
                pki_dir: Path, api: str, ctx: ssl.SSLContext, launch: Launch,
                problem: Callable[[str], str | None], free_ports: Callable[[int], list[int]],
                say: ProgressFn, timeout_s: float) -> tuple[PodNetwork, list[RealNodeInfo]]:
    """Start ``settings.count`` nodes numbered from ``first_index`` and wait until all are Ready.

    ``launch(name, argv)`` adds a supervised component; ``problem(name)`` says why a component failed
    (None while it runs).  Containerds start one after the other (each imports the images), kubelets as
    soon as their containerd is up; the wait for Ready is shared.
    """
    deadline = time.monotonic() + timeout_s
    check_can_run(kubelet)
    containerd = shutil.which("containerd") or "/usr/bin/containerd"
    net = ensure_network(cluster_dir)
    say("building the node images (pause, busybox)")
    try:
        images = build_node_images()
    except RuntimeError as exc:
        raise RealNodeError(str(exc)) from None
    infos: list[RealNodeInfo] = []
    for index in range(first_index, first_index + settings.count):
        layout = NodeLayout(cluster_dir, index)
        ports = free_ports(2)
        _prepare(layout, net, pki_dir, api, (ports[0], ports[1]), settings)
        start, end = net.node_range(index)
        info = RealNodeInfo(name=layout.name, index=index, kubelet_port=ports[0], healthz_port=ports[1],
                            root_dir=str(layout.kubelet_root), containerd_socket=str(layout.containerd_socket),
                            pod_range=f"{start}-{end}", fake_gpus=settings.fake_gpus, gpu_model=settings.gpu_model,
                            dra_gpus=settings.dra_gpus)
        infos.append(info)
        say(f"starting {layout.component('containerd')}")
        launch(layout.component("containerd"), containerd_component.argv(Path(containerd), layout))
        info.components.append(layout.component("containerd"))
        _wait_containerd(layout, problem, deadline)
        say(f"importing images into {layout.name}")
        try:
            import_node_images(images, layout.containerd_socket)
        except (RuntimeError, OSError) as exc:
            raise RealNodeError(f"{layout.name}: {exc}") from None
        say(f"starting {layout.component('kubelet')}")
        launch(layout.component("kubelet"), kubelet_component.argv(kubelet, layout, net))
        info.components.append(layout.component("kubelet"))
        if settings.fake_gpus > 0:
            launch(layout.component("deviceplugin"), deviceplugin_component.argv(layout, settings))
            info.components.append(layout.component("deviceplugin"))
        if settings.dra_gpus > 0:
            launch(layout.component("draplugin"), draplugin_component.argv(layout, settings))
            info.components.append(layout.component("draplugin"))
    if settings.dra_gpus > 0:
        made = ensure_device_classes(api, ctx, settings.dra or GpuSpec(expose="dra"))
        if made:
            say(f"created DeviceClass {', '.join(made)}")
    say(f"waiting for {', '.join(i.name for i in infos)} to be Ready")
    pending = {i.name for i in infos}
    while pending:
        for info in infos:
            for comp in info.components:
                why = problem(comp)
                if why:
                    raise RealNodeError(f"{comp} {why}")
        names = sorted(pending)
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            ready = dict(zip(names, pool.map(lambda n: node_ready(api, ctx, n), names), strict=True))
        pending = {n for n, ok in ready.items() if not ok}
        if pending and time.monotonic() > deadline:
            raise RealNodeError(f"timed out after {timeout_s:.0f}s waiting for {', '.join(sorted(pending))} to be "
                                f"Ready; logs in {cluster_dir / 'logs'}")
        if pending:
            time.sleep(0.5)
    return net, infos
