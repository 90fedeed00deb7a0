"""Build images from their recipes, cached by content.

Cache layout (under ``cache_root() / "images"`` unless another root is given):

- ``blobs/<sha256>``: layer blobs, named by their digest;
- ``layers/<fingerprint>.json``: which blob a layer fingerprint produced;
- ``images/<key>.json``: the archive an image key produced (the key hashes the reference, the
  layer fingerprints, the runtime config);
- ``archives/<name>-<manifest digest>.tar``: the OCI layout archives ``ctr images import`` reads.

A second build with unchanged inputs computes the fingerprints, finds the image record and returns:
no compiling, no tar writing. When one layer's inputs change (the project's code) only that layer
is written again; the others are reused by fingerprint.

Builds hold ``<root>/.lock`` (one build at a time per cache: two test workers or two runs asking for
the same image write it once), and each build that writes an archive prunes what no live image needs
any more: a blob is kept while an image record whose archive is still there names a layer made of
it. Without that, every fresh checkout (its virtualenv's files have new mtimes, so new fingerprints)
left another 3.7 GB distill layer behind, and a CI machine's disk filled.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.images.layout import Descriptor, Layer, LayoutError, image_docs, write_archive, write_layer
from hollowscale.images.recipe import FORMAT_VERSION, Recipe
from hollowscale.paths import cache_root

ProgressFn = Callable[[str], None]


class ImageError(RuntimeError):
    """An image could not be built or imported; the message says what, where and what to do."""


@dataclass(frozen=True)
class BuiltImage:
    """A built image.

    ``name`` is the full reference the image is imported as (``hollowscale.local/pause:3.10``; what
    pod specs name), ``archive`` the OCI layout tar, ``digest`` the manifest digest (what containerd
    shows for it), ``recipe`` the short name it was built from (``pause``), ``size`` the archive's
    bytes, ``cached`` whether it came from the cache unchanged, ``labels`` its config labels.
    """

    name: str
    archive: Path
    digest: str
    recipe: str = ""
    size: int = 0
    cached: bool = False
    labels: tuple[tuple[str, str], ...] = ()


def images_cache_root() -> Path:
    """Default image cache: ``cache_root() / "images"``."""
    return cache_root() / "images"


def _write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
    tmp.rename(path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _cached_layer(root: Path, fingerprint: str) -> Layer | None:
    doc = _read_json(root / "layers" / f"{fingerprint}.json")
    if not doc:
        return None
    desc = Descriptor(doc["media_type"], doc["digest"], int(doc["size"]))
    blob = root / "blobs" / desc.hex
    if not blob.is_file() or blob.stat().st_size != desc.size:
        return None
    return Layer(desc, doc["diff_id"])


def image_key(recipe: Recipe, fingerprints: Sequence[str]) -> str:
    """Hash of everything an image's archive depends on."""
    doc = {"format": FORMAT_VERSION, "image": recipe.image, "layers": list(fingerprints),
           "config": recipe.config, "labels": dict(recipe.labels)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _from_record(recipe: Recipe, doc: dict[str, Any], cached: bool) -> BuiltImage:
    return BuiltImage(name=recipe.image, archive=Path(doc["archive"]), digest=doc["digest"], recipe=recipe.name,
                      size=int(doc["size"]), cached=cached, labels=tuple(sorted(recipe.labels.items())))


def older_archives(folder: Path, name: str, keep: Path) -> list[Path]:
    """Archives of earlier builds of image ``name`` in ``folder``: exactly ``<name>-<16 hex>.tar`` (what a build
    writes), never ``keep``, another image whose name starts the same (``distill-cpu-extra-...``) or a file
    someone else put there."""
    pattern = re.compile(rf"{re.escape(name)}-[0-9a-f]{{16}}\.tar")
    return sorted(p for p in folder.glob("*.tar") if pattern.fullmatch(p.name) and p != keep and not p.is_symlink())


@contextlib.contextmanager
def cache_lock(root: Path) -> Iterator[None]:
    """Hold the image cache's lock (``<root>/.lock``, flock: released if the process dies)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_DIGEST_NAME = re.compile(r"[0-9a-f]{64}")


def prune_cache(root: Path) -> list[Path]:
    """Delete the blobs and records no live image needs; return what was deleted.

    Live: an image record (``images/*.json``) whose archive exists with its recorded size. Kept: those
    records, the layer records they name and the blobs those layers are. Deleted: other image and
    layer records and blobs (only files named as this module names them: 64 hex digits, ``.json``).
    Call it holding :func:`cache_lock`.
    """
    live_layers: set[str] = set()
    deleted: list[Path] = []
    for record_path in sorted((root / "images").glob("*.json")):
        doc = _read_json(record_path)
        archive = Path(doc["archive"]) if doc and doc.get("archive") else None
        if doc and archive is not None and archive.is_file() and archive.stat().st_size == int(doc.get("size", -1)):
            live_layers.update(str(f) for f in doc.get("layers") or ())
        elif _DIGEST_NAME.fullmatch(record_path.stem):
            record_path.unlink(missing_ok=True)
            deleted.append(record_path)
    live_blobs: set[str] = set()
    for layer_path in sorted((root / "layers").glob("*.json")):
        doc = _read_json(layer_path)
        if layer_path.stem in live_layers and doc and str(doc.get("digest", "")).startswith("sha256:"):
            live_blobs.add(str(doc["digest"]).split(":", 1)[1])
        elif _DIGEST_NAME.fullmatch(layer_path.stem):
            layer_path.unlink(missing_ok=True)
            deleted.append(layer_path)
    blobs = root / "blobs"
    for blob in sorted(blobs.iterdir()) if blobs.is_dir() else ():
        if _DIGEST_NAME.fullmatch(blob.name) and blob.name not in live_blobs and blob.is_file():
            blob.unlink(missing_ok=True)
            deleted.append(blob)
    return deleted


def build_recipe(recipe: Recipe, root: Path, progress: ProgressFn | None = None) -> BuiltImage:
    """Build one image (or find it in the cache) and return where its archive is."""
    with cache_lock(root):
        return _build_recipe(recipe, root, progress)


def _build_recipe(recipe: Recipe, root: Path, progress: ProgressFn | None) -> BuiltImage:
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    say(f"{recipe.name}: checking inputs")
    fingerprints = [layer.fingerprint() for layer in recipe.layers]
    key = image_key(recipe, fingerprints)
    record_path = root / "images" / f"{key}.json"
    record = _read_json(record_path)
    if record:
        archive = Path(record["archive"])
        if archive.is_file() and archive.stat().st_size == int(record["size"]):
            say(f"{recipe.name}: cached ({recipe.image}, {record['digest'][:19]})")
            return _from_record(recipe, record, cached=True)
    layers: list[Layer] = []
    for number, (layer_recipe, fingerprint) in enumerate(zip(recipe.layers, fingerprints, strict=True), start=1):
        layer = _cached_layer(root, fingerprint)
        where = f"{recipe.name}: layer {number}/{len(recipe.layers)} ({layer_recipe.title})"
        if layer is None:
            say(f"{where}: writing")
            layer_started = time.monotonic()
            (root / "work").mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f"{recipe.name}-", dir=root / "work"))
            try:
                entries = layer_recipe.entries(work)
                layer = write_layer(entries, root / "blobs", layer_recipe.compress)
            except (OSError, LayoutError) as exc:
                raise ImageError(f"{where}: {exc}") from exc
            finally:
                shutil.rmtree(work, ignore_errors=True)  # our own temp dir (mkdtemp above)
            _write_json_atomic(root / "layers" / f"{fingerprint}.json", {
                "media_type": layer.descriptor.media_type, "digest": layer.descriptor.digest,
                "size": layer.descriptor.size, "diff_id": layer.diff_id,
                "seconds": round(time.monotonic() - layer_started, 1),
            })
            say(f"{where}: {layer.descriptor.size / 1e6:.1f} MB in {time.monotonic() - layer_started:.1f}s")
        else:
            say(f"{where}: cached")
        layers.append(layer)
    docs = image_docs(recipe.image, layers, recipe.config, recipe.labels)
    archive = root / "archives" / f"{recipe.name}-{docs.manifest_descriptor.hex[:16]}.tar"
    say(f"{recipe.name}: writing {archive.name}")
    try:
        write_archive(archive, docs, layers, root / "blobs")
    except (OSError, LayoutError) as exc:
        raise ImageError(f"{recipe.name}: writing the archive {archive}: {exc}") from exc
    record = {"image": recipe.image, "archive": str(archive), "digest": docs.manifest_descriptor.digest,
              "size": archive.stat().st_size, "layers": fingerprints,
              "seconds": round(time.monotonic() - started, 1)}
    _write_json_atomic(record_path, record)
    for old in older_archives(root / "archives", recipe.name, archive):
        old.unlink(missing_ok=True)  # an older build of this image: its record now points nowhere
    freed = prune_cache(root)
    if freed:
        say(f"{recipe.name}: pruned {len(freed)} cache entries no live image needs")
    say(f"{recipe.name}: built {recipe.image} ({record['size'] / 1e6:.1f} MB) in {record['seconds']}s")
    return _from_record(recipe, record, cached=False)
