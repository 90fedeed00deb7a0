"""The distill image: the project's Python environment to run ``python -m distill``."""

from __future__ import annotations

from pathlib import Path

from hollowscale.images.build import ImageError
from hollowscale.images.recipe import Recipe
from hollowscale.images.small import REGISTRY

DISTILL_VERSION = "0.1.0"
DISTILL_IMAGE = f"{REGISTRY}/distill:{DISTILL_VERSION}"


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU (a driver's device node or proc entry)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def distill_recipe(gpu: bool) -> Recipe:
    raise ImageError("the distill image is not written yet")
