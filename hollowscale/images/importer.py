"""Import built images into a containerd (``ctr images import``), skipping what is already there.

Why ctr: the real nodes' containerd is our own process with its own socket; its CRI plugin serves
the ``k8s.io`` namespace, so an image imported there is what the kubelet sees (pods use
``imagePullPolicy: Never``). Importing unpacks into the default snapshotter, so the first container
does not pay for it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from hollowscale.images.build import BuiltImage, ImageError


def _ctr(ctr: str, address: Path, namespace: str, *args: str, timeout: float = 900.0) -> str:
    cmd = [ctr, "--address", str(address), "--namespace", namespace, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise ImageError(f"ctr not found at {ctr!r}: install containerd (`apt-get install -y containerd`)") from None
    except subprocess.TimeoutExpired:
        raise ImageError(f"`{' '.join(cmd)}` did not finish in {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise ImageError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}\n"
                         f"Is containerd running with its socket at {address}?")
    return proc.stdout


def present_images(ctr: str, address: Path, namespace: str = "k8s.io") -> dict[str, str]:
    """The images containerd holds in ``namespace``: reference -> manifest (or index) digest."""
    out = _ctr(ctr, address, namespace, "images", "list", timeout=60)
    found: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2].startswith("sha256:"):
            found[fields[0]] = fields[2]
    return found


def import_images(images: Sequence[BuiltImage], ctr: str, address: Path, namespace: str = "k8s.io") -> None:
    """Import ``images`` into the containerd at ``address``; those already there (same name and
    digest) are skipped, so calling it again is cheap and harmless."""
    if not address.is_socket():
        raise ImageError(f"no containerd socket at {address}: start containerd first "
                         "(`hollowscale cluster up --real-nodes N` starts one under the cluster dir)")
    present = present_images(ctr, address, namespace)
    for image in images:
        if present.get(image.name) == image.digest:
            continue
        if not image.archive.is_file():
            raise ImageError(f"image archive {image.archive} for {image.name} is missing: "
                             "build it again with `hollowscale images build`")
        _ctr(ctr, address, namespace, "images", "import", str(image.archive))
        after = present_images(ctr, address, namespace)
        if after.get(image.name) != image.digest:
            raise ImageError(f"imported {image.archive} but containerd lists {image.name} as "
                             f"{after.get(image.name, 'absent')}, expected {image.digest}")
