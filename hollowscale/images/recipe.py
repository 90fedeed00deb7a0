"""What an image is made of: layers (each with a cheap fingerprint and a way to list its entries).

Why fingerprints separate from entries: the cache must answer "is this layer already built?" in
milliseconds, without compiling the pause program or reading gigabytes of wheels. A fingerprint
hashes what the layer depends on (file paths, modes, sizes and mtimes; sources and compiler
versions); the entries are produced only when the fingerprint is not in the cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hollowscale.images.layout import Entry

# Bumped when the layer or archive format changes, so old cache entries are not reused.
FORMAT_VERSION = "1"


@dataclass(frozen=True)
class LayerRecipe:
    """One layer: ``fingerprint()`` is cheap; ``entries(workdir)`` may compile or transform files."""

    title: str
    fingerprint: Callable[[], str]
    entries: Callable[[Path], list[Entry]]
    compress: bool = True


@dataclass(frozen=True)
class Recipe:
    """One image: its short name (``pause``), full reference, layers and runtime config."""

    name: str
    image: str
    layers: Sequence[LayerRecipe]
    config: Mapping[str, Any]
    labels: Mapping[str, str] = field(default_factory=dict)


def entries_fingerprint(entries: Sequence[Entry], extra: str = "") -> str:
    """Hash of what entries depend on: paths, kinds, modes, targets, inline data, source size/mtime."""
    sha = hashlib.sha256(f"{FORMAT_VERSION}\0{extra}\0".encode())
    for entry in sorted(entries, key=lambda e: e.path):
        sha.update(f"{entry.path}\0{entry.kind}\0{entry.mode:o}\0{entry.target}\0".encode())
        if entry.data is not None:
            sha.update(hashlib.sha256(entry.data).digest())
        if entry.source is not None:
            st = entry.source.stat()
            sha.update(f"{entry.source}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return sha.hexdigest()


def files_layer(title: str, plan: Callable[[], list[Entry]], compress: bool = True,
                transform: Callable[[list[Entry], Path], list[Entry]] | None = None,
                extra: str = "") -> LayerRecipe:
    """A layer of files listed by ``plan`` (called once, cheap); ``transform`` runs only on a miss.

    ``extra`` names anything else the content depends on (e.g. the transform's own version).
    """
    planned: list[list[Entry]] = []

    def listing() -> list[Entry]:
        if not planned:
            planned.append(plan())
        return planned[0]

    def entries(workdir: Path) -> list[Entry]:
        return transform(listing(), workdir) if transform else listing()

    return LayerRecipe(title, lambda: entries_fingerprint(listing(), extra), entries, compress)
