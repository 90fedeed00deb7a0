"""Names, paths, ports and address ranges of real nodes: pure data, no side effects.

Everything a real node writes lives under ``<cluster dir>/real/`` (one dir per node plus the shared
image archives), so removing the cluster dir removes it, and the leftovers check can look for
anything of ours by that prefix.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hollow.dra import GpuSpec

NODE_PREFIX = "hs-real-"
#: the label every real node carries; real workloads select it
NODE_KIND_LABEL = "hollowscale.io/node-kind"
NODE_KIND_VALUE = "real"
#: the taint every real node carries (NoSchedule): hollow workloads never land there; real ones tolerate it
TAINT_KEY = "hollowscale.io/real-node"
TAINT_VALUE = "true"
TAINT_EFFECT = "NoSchedule"
DEFAULT_GPU_MODEL = "fake-gpu"
#: pod networks are /16s out of this block, one per cluster (the first free one is taken)
POD_SUPERNET = "10.88.0.0/13"
#: unix sockets are limited to 107 bytes; containerd adds ``.ttrpc`` to its socket's path
MAX_SOCKET_PATH = 100


@dataclass(frozen=True)
class RealNodeSettings:
    """What real nodes to start.

    Attributes:
        count: how many (``hs-real-0`` ... ``hs-real-<count-1>``, numbering continues on later adds).
        fake_gpus: when > 0, each node runs the fake device plugin (:mod:`hollowscale.deviceplugin`)
            advertising that many GPUs of ``gpu_model``.
        gpu_model: the model the fake device plugin (or the DRA plugin) reports.
        max_pods: the kubelet's ``maxPods``.
        dra_gpus: when > 0, each node runs the DRA plugin (:mod:`hollowscale.draplugin`) publishing that
            many fake GPUs as ResourceSlice devices (pods ask by claim, not ``nvidia.com/gpu``), and its
            containerd runs runc through the plugin's CDI wrapper.
        dra: those GPUs as a hollow pool's ``gpus:`` says them (model, memory sharing, MIG partitions;
            :class:`hollow.dra.GpuSpec`); None: H100s, not shared.
    """

    count: int = 1
    fake_gpus: int = 0
    gpu_model: str = DEFAULT_GPU_MODEL
    max_pods: int = 110
    dra_gpus: int = 0
    dra: GpuSpec | None = None

    def __post_init__(self) -> None:
        if self.count < 0 or self.count > 250:
            raise ValueError(f"real nodes: count must be 0..250 (one /24 of the pod network each), got {self.count}")
        if self.fake_gpus < 0 or self.dra_gpus < 0:
            raise ValueError(f"real nodes: fake_gpus and dra_gpus must be >= 0, got {self.fake_gpus}, {self.dra_gpus}")
        if self.fake_gpus and self.dra_gpus:
            raise ValueError("real nodes: fake_gpus (counted nvidia.com/gpu) and dra_gpus (DRA devices) are two ways "
                             "to offer the same GPUs; choose one")


@dataclass(frozen=True)
class PodNetwork:
    """The cluster's pod network: one bridge, one /16, the host side of the bridge is the gateway.

    Every node gets its own host-local range (``10.X.<index+1>.1-254``) of the same /16, so pods of all
    nodes share one L2 segment (the bridge) and reach each other directly; the gateway address is also
    every kubelet's node IP.  No default route is given to pods: nothing can leave the machine.
    """

    bridge: str
    cidr: str

    @property
    def gateway(self) -> str:
        return str(ipaddress.ip_network(self.cidr).network_address + 1)

    @property
    def cni_name(self) -> str:
        """The CNI network's name, unique per cluster like the bridge (libcni caches results under it)."""
        return cni_network_name(self.bridge)

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.cidr).prefixlen

    def node_range(self, index: int) -> tuple[str, str]:
        """First and last pod address of node ``index``."""
        base = ipaddress.ip_network(self.cidr).network_address + 256 * (index + 1)
        return str(base + 1), str(base + 254)


def bridge_name(cluster_dir: Path) -> str:
    """``hsbr-<8 hex>``: derived from the cluster dir, so it cannot clash with another cluster's (15 chars max)."""
    return "hsbr-" + hashlib.sha256(str(Path(cluster_dir).absolute()).encode()).hexdigest()[:8]


def cni_network_name(bridge: str) -> str:
    """``hollowscale-<8 hex>``: the CNI network of the cluster whose bridge is ``bridge``."""
    return "hollowscale-" + bridge.removeprefix("hsbr-")


def pick_pod_cidr(used: list[str], supernet: str = POD_SUPERNET) -> str:
    """The first /16 of ``supernet`` that overlaps none of ``used`` (the machine's routes and addresses)."""
    taken = [ipaddress.ip_network(u, strict=False) for u in used]
    for candidate in ipaddress.ip_network(supernet).subnets(new_prefix=16):
        if not any(candidate.overlaps(t) for t in taken):
            return str(candidate)
    raise RuntimeError(f"no free /16 for the pod network in {supernet} (all overlap routes of this machine)")


@dataclass(frozen=True)
class NodeLayout:
    """Where one node's files live (``<cluster>/real/<name>/``)."""

    cluster_dir: Path
    index: int

    @property
    def name(self) -> str:
        return f"{NODE_PREFIX}{self.index}"

    @property
    def base(self) -> Path:
        return self.cluster_dir / "real" / self.name

    @property
    def containerd_root(self) -> Path:
        return self.base / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.base / "containerd" / "state"

    @property
    def containerd_config(self) -> Path:
        return self.base / "containerd" / "config.toml"

    @property
    def cri_sandboxes(self) -> Path:
        """The CRI plugin's dir of pod sandboxes (one dir per sandbox id, removed with the sandbox)."""
        return self.containerd_root / "io.containerd.grpc.v1.cri" / "sandboxes"

    @property
    def containerd_socket(self) -> Path:
        return self.base / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.base / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.base / "kubelet-config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.base / "kubelet.kubeconfig"

    @property
    def pki(self) -> Path:
        return self.base / "pki"

    @property
    def cni_conf_dir(self) -> Path:
        return self.base / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.base / "cni" / "ipam"

    @property
    def pod_logs_dir(self) -> Path:
        return self.base / "pod-logs"

    @property
    def cdi_dir(self) -> Path:
        """The node's CDI spec dir (the DRA plugin writes it, the node's runc wrapper reads it)."""
        return self.base / "cdi"

    @property
    def runc_wrapper(self) -> Path:
        """runc with CDI applied (:mod:`hollowscale.draplugin.runtime`): the runtime of a node with DRA GPUs."""
        return self.base / "containerd" / "runc-cdi"

    @property
    def plugins_registry(self) -> Path:
        """The kubelet's plugin watcher dir: a device plugin registers here (``<root-dir>/plugins_registry``)."""
        return self.kubelet_root / "plugins_registry"

    def component(self, what: str) -> str:
        """Supervisor component name: ``hs-real-0-containerd``, ``-kubelet``, ``-deviceplugin``, ``-draplugin``."""
        return f"{self.name}-{what}"

    def check(self) -> None:
        """Refuse paths a unix socket cannot carry."""
        if len(str(self.containerd_socket)) > MAX_SOCKET_PATH:
            raise ValueError(f"{self.containerd_socket} is longer than {MAX_SOCKET_PATH} bytes, too long for a "
                             "unix socket; use a shorter cluster --dir")


@dataclass
class RealNodeInfo:
    """One running real node, as ``state.json`` and ``ClusterInfo.real_nodes`` record it."""

    name: str
    index: int
    kubelet_port: int
    healthz_port: int
    root_dir: str
    containerd_socket: str
    pod_range: str
    fake_gpus: int = 0
    gpu_model: str = DEFAULT_GPU_MODEL
    components: list[str] = field(default_factory=list)
    dra_gpus: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
