"""``hollowscale kind``: kind clusters made from what is built here (mounted by hollowscale.cli)."""

from __future__ import annotations

import sys

import click

from hollowscale.cluster.binaries import BuildError
from hollowscale.images.build import ImageError
from hollowscale.images.layout import LayoutError
from hollowscale.kindnode.engine import EngineError, ensure_podman, load_image
from hollowscale.kindnode.image import build_node_image
from hollowscale.kindnode.rootfs import MIRROR_ENV, RootfsError


@click.group("kind")
def kind_group() -> None:
    """kind clusters from what is built here: no registry, no Docker daemon.

    kind's own images come from a registry this machine cannot reach, so the node image is assembled
    here (a Debian tree by debootstrap, kind's files from its Go module, kubeadm/kubelet/kubectl and
    the control-plane images from our Kubernetes build) and runs in Debian's podman, unpacked into
    hollowscale's cache.
    """


@kind_group.command("node-image")
@click.option("--load/--no-load", default=True, show_default=True,
              help="Load the image into hollowscale's podman (where kind's podman provider looks for it).")
def node_image_cmd(load: bool) -> None:
    """Build the kind node image (cached by content: a second build writes nothing) and say what it holds.

    Cold, it builds what is missing: kubeadm, kube-proxy, the kubelet and CoreDNS (Go, minutes), the
    Debian tree (debootstrap from the Debian archive, ~2 minutes; set $HOLLOWSCALE_DEBIAN_MIRROR for
    another mirror), the control-plane images and the node image (~1 GB in the image cache).
    """
    def say(msg: str) -> None:
        click.echo(f"  {msg}", err=True)

    try:
        node = build_node_image(say)
        click.echo(f"{node.image.name}\n  archive: {node.image.archive} ({node.image.size / 1e6:.0f} MB)\n"
                   f"  {'cached' if node.cached else 'built'} in {node.seconds:.1f} s; images inside: "
                   + ", ".join(c.name for c in node.components))
        if load:
            podman = ensure_podman(say)
            loaded = load_image(podman, node.image.name, node.image.digest, node.image.archive)
            click.echo(f"  {'loaded into' if loaded else 'already loaded (same digest) in'} {podman.bin_dir / 'podman'}")
    except (BuildError, ImageError, LayoutError, RootfsError, EngineError) as exc:
        click.echo(f"error: {exc}", err=True)
        if isinstance(exc, RootfsError):
            click.echo(f"(the Debian mirror is ${MIRROR_ENV} or deb.debian.org)", err=True)
        sys.exit(1)
