"""Configuration files of a real node: containerd, CNI, kubelet (their command lines:
:mod:`hollowscale.cluster.components`).

Pure functions of a :class:`~hollowscale.cluster.realnode.layout.NodeLayout` (unit-tested without
starting anything).  Why each non-default setting is there:

containerd (1.6, CRI plugin), one per node, own root/state/socket:
  * ``restrict_oom_score_adj``, ``disable_apparmor``: without them runc fails on this machine
    ("can't get final child's PID from pipe: EOF").
  * ``netns_mounts_under_state_dir``: pod network namespaces are bind-mounted under the node's state dir,
    not ``/var/run/netns``, so they are ours to find and unmount at ``down``.
  * ``opt`` plugin path, CNI ``conf_dir``, runc's state ``Root``: under the node dir (the defaults write
    ``/opt/containerd``, ``/run/containerd/runc`` and read ``/etc/cni/net.d``); ttrpc/debug/metrics
    listeners off.  Hard-coded, not movable: shim sockets in ``/run/containerd/s`` (removed by each shim
    when its task is deleted) and libcni's result cache in ``/var/lib/cni/results`` (a sandbox torn down
    without CNI DEL leaves its entries: :mod:`.teardown` removes ours).

CNI: network ``hollowscale-<hash>`` (per cluster), ``bridge`` on the project's bridge with ``host-local`` IPAM (data dir under the node dir),
``isGateway: false`` (the bridge's gateway address is set by us; with ``isGateway`` the plugin turns on
``net.ipv4.ip_forward``), ``ipMasq: false``, no routes: pods get an address in the /16 (so every pod
of every node is on-link) and no default route.  The CRI plugin adds the ``loopback`` plugin itself.

kubelet: the settings this machine needs (cgroup v1 hybrid, cgroupfs, no QoS cgroups, no
allocatable enforcement, no eviction, swap tolerated), ``makeIPTablesUtilChains: false`` (else it
adds KUBE-FIREWALL/KUBE-IPTABLES-HINT chains to the machine's iptables), image GC off (imported images
cannot be pulled again), pod logs and volume plugins under the node dir, x509 + webhook authn and
webhook authz (the apiserver's kubelet client is ``system:masters``), serving on the bridge's gateway
address with a certificate from the cluster CA.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hollowscale.cluster.realnode.layout import (
    TAINT_EFFECT,
    TAINT_KEY,
    TAINT_VALUE,
    NodeLayout,
    PodNetwork,
    RealNodeSettings,
)

CNI_BIN_DIR = Path("/usr/lib/cni")
#: plugins compiled into Debian's containerd that would only probe the machine (and log errors)
DISABLED_PLUGINS = (
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
)


def _q(value: str) -> str:
    """A TOML basic string."""
    return json.dumps(value)


def containerd_config(layout: NodeLayout, pause_image: str, runc_binary: Path | None = None) -> str:
    """``config.toml`` (version 2) of the node's own containerd; ``runc_binary``: the runc runtime's
    ``BinaryName`` (a node with DRA GPUs runs runc through the DRA plugin's CDI wrapper)."""
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    return "\n".join([
        "# Written by hollowscale.cluster.realnode: one containerd per real node.",
        "version = 2",
        f"root = {_q(str(layout.containerd_root))}",
        f"state = {_q(str(layout.containerd_state))}",
        'plugin_dir = ""',
        f"disabled_plugins = [{', '.join(_q(p) for p in DISABLED_PLUGINS)}]",
        "",
        "[grpc]",
        f"  address = {_q(str(layout.containerd_socket))}",
        "[ttrpc]",
        '  address = ""',
        "[debug]",
        '  address = ""',
        '  level = "warn"',
        "[metrics]",
        '  address = ""',
        "",
        '[plugins."io.containerd.internal.v1.opt"]',
        f"  path = {_q(str(layout.base / 'containerd' / 'opt'))}",
        "",
        cri,
        f"  sandbox_image = {_q(pause_image)}",
        "  restrict_oom_score_adj = true",
        "  disable_apparmor = true",
        "  netns_mounts_under_state_dir = true",
        "  enable_selinux = false",
        "  disable_hugetlb_controller = true",
        "  tolerate_missing_hugetlb_controller = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        f"{cri[:-1]}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"{cri[:-1]}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"{cri[:-1]}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        f"  Root = {_q(str(layout.containerd_state / 'runc'))}",
        *([f"  BinaryName = {_q(str(runc_binary))}"] if runc_binary else []),
        f"{cri[:-1]}.cni]",
        f"  bin_dir = {_q(str(CNI_BIN_DIR))}",
        f"  conf_dir = {_q(str(layout.cni_conf_dir))}",
        "  max_conf_num = 1",
        "",
    ])


def cni_conflist(layout: NodeLayout, net: PodNetwork) -> dict[str, Any]:
    """The node's CNI network list: the bridge plugin on the cluster's bridge, the node's own range."""
    start, end = net.node_range(layout.index)
    return {
        "cniVersion": "1.0.0",
        "name": net.cni_name,
        "plugins": [{
            "type": "bridge",
            "bridge": net.bridge,
            "isGateway": False,
            "isDefaultGateway": False,
            "ipMasq": False,
            "hairpinMode": False,
            "ipam": {
                "type": "host-local",
                "dataDir": str(layout.cni_ipam_dir),
                "ranges": [[{"subnet": net.cidr, "rangeStart": start, "rangeEnd": end, "gateway": net.gateway}]],
                "routes": [],
            },
        }],
    }


def kubelet_config(layout: NodeLayout, net: PodNetwork, ca_file: Path, serving: tuple[Path, Path],
                   port: int, healthz_port: int, settings: RealNodeSettings) -> dict[str, Any]:
    """The ``KubeletConfiguration`` of one real node."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": net.gateway,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(serving[0]),
        "tlsPrivateKeyFile": str(serving[1]),
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "localStorageCapacityIsolation": False,
        "evictionHard": {},
        "makeIPTablesUtilChains": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "podLogsDir": str(layout.pod_logs_dir),
        "volumePluginDir": str(layout.base / "volume-plugins"),
        "resolvConf": "",
        "maxPods": settings.max_pods,
        "registerWithTaints": [{"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT}],
        "registerNode": True,
        "nodeStatusUpdateFrequency": "10s",
        "shutdownGracePeriod": "0s",
    }
