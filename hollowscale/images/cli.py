"""``hollowscale images ...``: build the real nodes' images and import them into a containerd."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import click
from rich.console import Console

from hollowscale.images import DEFAULT_IMAGES, IMAGE_NAMES, ImageError, build_images, import_images
from hollowscale.images.build import images_cache_root
from hollowscale.images.layout import LayoutError

console = Console(stderr=True)


def _names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in IMAGE_NAMES]
    if not names or unknown:
        raise click.BadParameter(f"{', '.join(unknown) or 'nothing'}: expected a comma-separated list of "
                                 f"{', '.join(IMAGE_NAMES)}")
    return names


@click.group("images")
def images_group() -> None:
    """OCI images for the real nodes, written by hollowscale itself (no registry, no Docker)."""


@images_group.command("build")
@click.option("--only", default=",".join(DEFAULT_IMAGES), show_default=True, metavar="NAMES",
              help=f"Comma-separated images to build, of: {', '.join(IMAGE_NAMES)}. `distill` is the GPU "
                   "variant (with the CUDA wheels) on a machine with NVIDIA GPUs, else the CPU variant.")
@click.option("--import-to", "socket", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="SOCKET", help="Also import them into the containerd listening on SOCKET "
                                     "(skips images it already holds with the same digest).")
@click.option("--namespace", default="k8s.io", show_default=True,
              help="containerd namespace to import into (k8s.io is the one the CRI plugin serves).")
@click.option("--ctr", "ctr", default="ctr", show_default=True, help="The ctr binary used to import.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Image cache directory [default: {images_cache_root()}].")
def build_cmd(only: str, socket: Path | None, namespace: str, ctr: str, cache: Path | None) -> None:
    """Build the pause, busybox and distill images (agent and prometheus when asked) as OCI layouts, cached.

    \b
    pause    the pod sandbox (a static C program; what the CRI config names)
    busybox  Debian's busybox-static with its applets (sh, sleep, httpd, nc, wget ...)
    distill  the project's Python environment for `python -m distill` (teacher, student),
             with Fashion-MNIST; distill-cpu leaves out the CUDA wheels, distill-gpu has them
    agent    the hollow agent and Locust (hollow, loadgen, kubecore and their wheels; no
             torch) for in-cluster runs (deploy/hollowscale)
    prometheus  Debian's Prometheus binary, for in-cluster runs

    A second build with unchanged inputs takes seconds. Prints one line per image:
    NAME DIGEST ARCHIVE. Pods use them with imagePullPolicy: Never.
    """
    names = _names(only)
    if socket is not None and shutil.which(ctr) is None and not Path(ctr).is_file():
        raise click.UsageError(f"--import-to needs ctr, and {ctr!r} was not found (apt-get install -y containerd)")
    started = time.monotonic()
    try:
        with console.status("building images") as status:

            def progress(msg: str) -> None:
                status.update(msg)
                console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}", highlight=False)

            built = build_images(names, progress=progress, cache=cache)
            if socket is not None:
                status.update(f"importing into {socket}")
                import_images(built, ctr, socket, namespace)
    except (ImageError, LayoutError, OSError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(1)
    what = f", imported into {socket} ({namespace})" if socket else ""
    console.print(f"{len(built)} image(s) ready in {time.monotonic() - started:.1f}s{what}:")
    for image in built:
        click.echo(f"{image.name} {image.digest} {image.archive}")
