"""OCI images written by our own code, for the real nodes' containerd (no registry, no Docker).

- :mod:`hollowscale.images.layout`: deterministic layer tars and OCI layout archives;
- :mod:`hollowscale.images.recipe`: what an image is made of, and cheap fingerprints for the cache;
- :mod:`hollowscale.images.pause` and :mod:`hollowscale.images.small`: the pause and busybox images;
- :mod:`hollowscale.images.distill_image`: the distill image (the project's Python environment);
- :mod:`hollowscale.images.agent_image`: the agent image (hollow agent and Locust) and the Prometheus
  image of in-cluster runs (``deploy/hollowscale``);
- :mod:`hollowscale.images.build`: building with the content cache;
- :mod:`hollowscale.images.importer`: ``ctr images import``, idempotent.

Image names: ``pause``, ``busybox``, ``distill`` (the GPU variant on a machine with NVIDIA GPUs,
else the CPU variant), ``distill-cpu``, ``distill-gpu``, ``agent``, ``prometheus``. Both distill variants are tagged
:data:`DISTILL_IMAGE`, so manifests name one image whatever the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hollowscale.images.agent_image import AGENT_IMAGE, agent_recipe, prometheus_recipe
from hollowscale.images.build import BuiltImage, ImageError, ProgressFn, build_recipe, images_cache_root
from hollowscale.images.distill_image import DISTILL_IMAGE, distill_recipe, has_nvidia_gpu
from hollowscale.images.importer import import_images
from hollowscale.images.recipe import Recipe
from hollowscale.images.small import BUSYBOX_IMAGE, PAUSE_IMAGE, busybox_recipe, pause_recipe

__all__ = [
    "AGENT_IMAGE", "BUSYBOX_IMAGE", "DISTILL_IMAGE", "IMAGE_NAMES", "PAUSE_IMAGE", "BuiltImage", "ImageError",
    "build_images", "import_images", "recipe_for",
]

DEFAULT_IMAGES = ("pause", "busybox", "distill")

_RECIPES: dict[str, Callable[[Path], Recipe]] = {
    "pause": lambda _root: pause_recipe(),
    "busybox": lambda _root: busybox_recipe(),
    "distill": lambda root: distill_recipe(gpu=has_nvidia_gpu(), ldd_cache=root / "ldd.json"),
    "distill-cpu": lambda root: distill_recipe(gpu=False, ldd_cache=root / "ldd.json"),
    "distill-gpu": lambda root: distill_recipe(gpu=True, ldd_cache=root / "ldd.json"),
    "agent": lambda root: agent_recipe(ldd_cache=root / "ldd.json"),
    "prometheus": lambda root: prometheus_recipe(ldd_cache=root / "ldd.json"),
}
IMAGE_NAMES = tuple(_RECIPES)


def recipe_for(name: str, cache: Path | None = None) -> Recipe:
    """The recipe of image ``name``; an unknown name is an :class:`ImageError` listing the known ones.
    ``cache``: the image cache root (the distill recipe remembers ``ldd`` answers there)."""
    try:
        factory = _RECIPES[name]
    except KeyError:
        raise ImageError(f"unknown image {name!r}: expected one of {', '.join(IMAGE_NAMES)}") from None
    return factory(cache or images_cache_root())


def build_images(names: Sequence[str] = DEFAULT_IMAGES, progress: ProgressFn | None = None,
                 cache: Path | None = None) -> list[BuiltImage]:
    """Build (or take from the cache) the images ``names``, in order; ``cache`` defaults to
    ``cache_root() / "images"``. Raises :class:`ImageError` with what failed and where."""
    root = cache or images_cache_root()
    recipes = [recipe_for(name, root) for name in names]  # every name checked before anything is built
    return [build_recipe(recipe, root, progress) for recipe in recipes]
