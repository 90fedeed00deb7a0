"""``hollowscale kind node-image``: a kind node image built here from our own binaries, no registry involved.

kind's own ``kind build node-image`` starts FROM ``kindest/base`` (a registry image) and fetches every
image it did not build with ``ctr content fetch``; neither is reachable here.  This builds the same
thing from what is: the Debian tree (:mod:`hollowscale.kindnode.rootfs`), kind's files from its Go module
and our changes (:mod:`hollowscale.kindnode.files`), kubeadm, kubelet and kubectl from our Kubernetes
build, and the images kubeadm runs, written by our own OCI writer (:mod:`hollowscale.images`):

- ``registry.k8s.io/kube-{apiserver,controller-manager,scheduler}:<k8s>``: our static binaries in
  ``/usr/local/bin`` (kubeadm's static pods call them by name through ``PATH``);
- ``registry.k8s.io/kube-proxy:<k8s>``: kube-proxy runs ``/usr/local/bin/kube-proxy`` and calls iptables
  and conntrack, so it sits on the node's Debian tree (the same layer, so the build shares it);
- ``registry.k8s.io/etcd:<etcd>-0`` and ``registry.k8s.io/coredns/coredns:<coredns>``: our builds of etcd
  and CoreDNS.  kubeadm v1.36.3 names etcd 3.6.8-0 and CoreDNS v1.14.2; the module proxy serves neither
  as a build here (etcd is pinned for the whole project, CoreDNS v1.14.2 is not served), so the images
  carry their real versions in their tags and :func:`kubeadm_image_patch` tells kubeadm which tags to run;
- ``registry.k8s.io/pause:3.10``: our pause, the sandbox image kind's containerd config names.

Every image and layer goes through the image cache (:func:`hollowscale.images.build.build_recipe`), so a
second build with the same inputs writes nothing; the node image's tag names the versions it holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hollowscale.cluster.binaries import (
    binaries,
    ensure_binaries,
    ensure_kube_command,
    ensure_module_tool,
    go_mod_download,
)
from hollowscale.images.build import BuiltImage, build_recipe, images_cache_root
from hollowscale.images.layout import Entry, file_entry
from hollowscale.images.recipe import Recipe, files_layer
from hollowscale.images.small import PATH_ENV, pause_recipe
from hollowscale.kindnode.files import node_entries
from hollowscale.kindnode.rootfs import NODE_PACKAGES, SUITE, rootfs_layer
from hollowscale.versions import COREDNS_VERSION, ETCD_VERSION, KIND_VERSION, KUBERNETES_VERSION

REGISTRY = "registry.k8s.io"
NODE_REPOSITORY = "localhost/hollowscale/kind-node"
SANDBOX_IMAGE = f"{REGISTRY}/pause:3.10"
ETCD_TAG = ETCD_VERSION.removeprefix("v") + "-0"
COREDNS_TAG = COREDNS_VERSION
ProgressFn = Callable[[str], None]


def node_image_name() -> str:
    """The node image's reference: its tag says what it holds (Kubernetes, etcd, CoreDNS, kind's files)."""
    return f"{NODE_REPOSITORY}:{KUBERNETES_VERSION}-etcd{ETCD_VERSION.removeprefix('v')}-coredns" \
           f"{COREDNS_VERSION.removeprefix('v')}-kind{KIND_VERSION.removeprefix('v')}-{SUITE}"


def kubeadm_image_patch() -> str:
    """The kind ``kubeadmConfigPatches`` entry that points kubeadm at the etcd and CoreDNS tags we built."""
    return "\n".join(["kind: ClusterConfiguration", "etcd:", "  local:", f'    imageTag: "{ETCD_TAG}"', "dns:",
                      f'  imageTag: "{COREDNS_TAG}"', ""])


def _binary_recipe(name: str, image: str, binary: Path, path: str) -> Recipe:
    layer = files_layer(f"{name} ({binary.name})", lambda: [file_entry(path, binary, 0o755)], compress=True)
    return Recipe(f"kind-{name}", image, [layer], {"Env": [PATH_ENV]})


def component_recipes(progress: ProgressFn | None = None) -> list[Recipe]:
    """The images kubeadm runs on a kind node (module docstring), built from our binaries."""
    bins = ensure_binaries(progress)
    kube_proxy = ensure_kube_command("kube-proxy", progress)
    coredns = ensure_module_tool("coredns", "github.com/coredns/coredns", COREDNS_VERSION,
                                 "github.com/coredns/coredns", progress=progress)
    k8s = KUBERNETES_VERSION
    recipes = [
        _binary_recipe("kube-apiserver", f"{REGISTRY}/kube-apiserver:{k8s}", bins.kube_apiserver,
                       "usr/local/bin/kube-apiserver"),
        _binary_recipe("kube-controller-manager", f"{REGISTRY}/kube-controller-manager:{k8s}",
                       bins.kube_controller_manager, "usr/local/bin/kube-controller-manager"),
        _binary_recipe("kube-scheduler", f"{REGISTRY}/kube-scheduler:{k8s}", bins.kube_scheduler,
                       "usr/local/bin/kube-scheduler"),
        _binary_recipe("etcd", f"{REGISTRY}/etcd:{ETCD_TAG}", bins.etcd, "usr/local/bin/etcd"),
    ]
    dns = _binary_recipe("coredns", f"{REGISTRY}/coredns/coredns:{COREDNS_TAG}", coredns, "coredns")
    recipes.append(Recipe(dns.name, dns.image, dns.layers, {"Entrypoint": ["/coredns"], "Env": [PATH_ENV]}))
    proxy_layer = files_layer("kube-proxy", lambda: [file_entry("usr/local/bin/kube-proxy", kube_proxy, 0o755)])
    recipes.append(Recipe("kind-kube-proxy", f"{REGISTRY}/kube-proxy:{k8s}", [rootfs_layer(NODE_PACKAGES, progress),
                                                                              proxy_layer], {"Env": [PATH_ENV]}))
    pause = pause_recipe()
    recipes.append(Recipe("kind-pause", SANDBOX_IMAGE, pause.layers, pause.config))
    return recipes


def node_recipe(components: list[BuiltImage], progress: ProgressFn | None = None) -> Recipe:
    """The node image: the Debian tree, then everything above it (:func:`hollowscale.kindnode.files.node_entries`)."""
    kube = binaries().kube_apiserver.parent
    node_bins = {"kubeadm": ensure_kube_command("kubeadm", progress), "kubelet": ensure_kube_command("kubelet", progress),
                 "kubectl": kube / "kubectl"}
    kind_dir = Path(go_mod_download("sigs.k8s.io/kind", KIND_VERSION)["Dir"])
    images = [(f"{c.recipe}.tar", c.archive) for c in components]

    def plan() -> list[Entry]:
        return node_entries(kind_dir, node_bins, KUBERNETES_VERSION, images, f"{REGISTRY}/kube-proxy:{KUBERNETES_VERSION}")

    config = {"Entrypoint": ["/usr/local/bin/entrypoint", "/sbin/init"],
              "Env": ["container=docker", PATH_ENV], "StopSignal": "SIGRTMIN+3"}
    labels = {"io.hollowscale.kubernetes": KUBERNETES_VERSION, "io.hollowscale.etcd": ETCD_VERSION,
              "io.hollowscale.coredns": COREDNS_VERSION, "io.hollowscale.kind": KIND_VERSION,
              "io.hollowscale.debian": SUITE}
    return Recipe("kind-node", node_image_name(), [rootfs_layer(NODE_PACKAGES, progress),
                                                    files_layer("kind's files, our binaries and images", plan,
                                                                compress=False)], config, labels)


@dataclass(frozen=True)
class NodeImage:
    """A built node image: its archive, the component images inside it, and how long the build took."""

    image: BuiltImage
    components: tuple[BuiltImage, ...]
    seconds: float

    @property
    def cached(self) -> bool:
        return self.image.cached and all(c.cached for c in self.components)


def build_node_image(progress: ProgressFn | None = None, root: Path | None = None) -> NodeImage:
    """Build (or find in the cache) the component images and the node image; module docstring."""
    started = time.monotonic()
    cache = root or images_cache_root()
    components = tuple(build_recipe(r, cache, progress) for r in component_recipes(progress))
    node = build_recipe(node_recipe(list(components), progress), cache, progress)
    return NodeImage(node, components, round(time.monotonic() - started, 1))


__all__ = ["COREDNS_TAG", "ETCD_TAG", "NODE_REPOSITORY", "SANDBOX_IMAGE", "NodeImage", "build_node_image",
           "component_recipes", "kubeadm_image_patch", "node_image_name", "node_recipe"]
