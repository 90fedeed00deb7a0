"""Deterministic layer tars and OCI image layout archives.

Why our own writer: no registry and no Docker engine are reachable, so the images the real nodes run
are written here and imported with ``ctr images import``. Everything that goes into a tar is fixed
except the content itself (entries sorted by path, mtime 0, uid/gid 0, no user/group names, gzip
without name or time), so the same content always gives the same digests: the cache can trust them
and two machines building from the same inputs get the same image.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

MEDIA_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"
CONTAINERD_NAME = "io.containerd.image.name"
_CHUNK = 1 << 20


class LayoutError(RuntimeError):
    """An image could not be written: the message names the entry or file and what was expected."""


@dataclass(frozen=True)
class Entry:
    """One member of a layer: a directory, a regular file (from ``source`` or ``data``) or a symlink.

    ``path`` is relative to the image root (``usr/bin/env``, no leading slash).
    """

    path: str
    kind: str  # "dir" | "file" | "symlink"
    mode: int = 0o755
    source: Path | None = None
    data: bytes | None = None
    target: str = ""

    def __post_init__(self) -> None:
        if self.path.startswith("/") or not self.path or ".." in self.path.split("/"):
            raise LayoutError(f"layer entry path {self.path!r} must be relative to the image root, without '..'")
        if self.kind not in ("dir", "file", "symlink"):
            raise LayoutError(f"layer entry {self.path!r}: kind {self.kind!r} is not dir, file or symlink")
        if self.kind == "file" and (self.source is None) == (self.data is None):
            raise LayoutError(f"layer entry {self.path!r}: a file needs exactly one of source or data")
        if self.kind == "symlink" and not self.target:
            raise LayoutError(f"layer entry {self.path!r}: a symlink needs a target")


def file_entry(path: str, source: Path, mode: int | None = None) -> Entry:
    """A regular file copied from ``source`` (its permission bits unless ``mode`` is given)."""
    return Entry(path, "file", mode if mode is not None else (source.stat().st_mode & 0o7777), source=source)


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor (media type, digest, size) plus optional annotations."""

    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    platform: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.annotations:
            out["annotations"] = dict(sorted(self.annotations.items()))
        if self.platform:
            out["platform"] = dict(self.platform)
        return out

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]


@dataclass(frozen=True)
class Layer:
    """A written layer blob: its descriptor and ``diff_id`` (digest of the uncompressed tar)."""

    descriptor: Descriptor
    diff_id: str


class _HashingWriter(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``sink`` (if any)."""

    def __init__(self, sink: IO[bytes] | gzip.GzipFile | None) -> None:
        self.sink = sink
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        view = memoryview(b)
        self.sha.update(view)
        self.size += len(view)
        if self.sink is not None:
            self.sink.write(view)
        return len(view)

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


def with_parents(entries: Iterable[Entry]) -> list[Entry]:
    """Entries sorted by path, with a ``0755`` directory added for every missing parent.

    Two entries for one path are an error (which one should win would be an accident of order).
    """
    by_path: dict[str, Entry] = {}
    for entry in entries:
        path = entry.path.rstrip("/")
        if path in by_path and by_path[path] != entry:
            raise LayoutError(f"two different layer entries for {path!r}: {by_path[path]} and {entry}")
        by_path[path] = entry
    for path in list(by_path):
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            existing = by_path.get(parent)
            if existing is None:
                by_path[parent] = Entry(parent, "dir", 0o755)
            elif existing.kind != "dir":
                raise LayoutError(f"layer entry {path!r} is under {parent!r}, which is a {existing.kind}, not a dir")
    return [by_path[p] for p in sorted(by_path)]


def _tarinfo(entry: Entry, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.path + ("/" if entry.kind == "dir" else ""))
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = entry.mode
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.target
    else:
        info.type = tarfile.REGTYPE
        info.size = size
    return info


def write_tar(entries: Sequence[Entry], out: IO[bytes]) -> None:
    """Write ``entries`` (parents added, sorted) as a deterministic PAX tar into ``out``."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        tar.copybufsize = _CHUNK  # type: ignore[attr-defined]  # 1 MiB copies instead of 16 KiB: the multi-GB layers are I/O bound
        for entry in with_parents(entries):
            if entry.kind != "file":
                tar.addfile(_tarinfo(entry))
                continue
            if entry.data is not None:
                tar.addfile(_tarinfo(entry, len(entry.data)), io.BytesIO(entry.data))
                continue
            assert entry.source is not None
            try:
                with open(entry.source, "rb") as src:
                    size = os.fstat(src.fileno()).st_size
                    tar.addfile(_tarinfo(entry, size), src)
            except OSError as exc:
                raise LayoutError(f"cannot read {entry.source} for layer entry {entry.path!r}: {exc}") from exc


def write_layer(entries: Sequence[Entry], blob_dir: Path, compress: bool, level: int = 6) -> Layer:
    """Write a layer blob into ``blob_dir`` (named by its digest) and return its descriptor.

    ``compress``: gzip (smaller archives, slower to build) or a plain tar (for the multi-GB layers,
    where gzip would dominate the build time). The file is written under a temporary name and
    renamed, so an interrupted build never leaves a blob whose name lies about its content.
    """
    blob_dir.mkdir(parents=True, exist_ok=True)
    tmp = blob_dir / f".tmp-{os.getpid()}-{id(entries)}"
    try:
        with open(tmp, "wb") as raw:
            outer = _HashingWriter(raw)
            if compress:
                with gzip.GzipFile(filename="", mode="wb", fileobj=outer, compresslevel=level, mtime=0) as gz:
                    inner = _HashingWriter(gz)
                    write_tar(entries, inner)  # type: ignore[arg-type]
                diff_id = inner.digest
            else:
                write_tar(entries, outer)  # type: ignore[arg-type]
                diff_id = outer.digest
        digest = outer.digest
        tmp.rename(blob_dir / digest.split(":", 1)[1])
    finally:
        tmp.unlink(missing_ok=True)
    media = MEDIA_LAYER_GZIP if compress else MEDIA_LAYER_TAR
    return Layer(Descriptor(media, digest, outer.size), diff_id)


def json_bytes(doc: Mapping[str, Any]) -> bytes:
    """Canonical JSON (sorted keys, no spaces): equal documents give equal digests."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ImageDocs:
    """The JSON documents of one image: config, manifest, index (bytes as they are stored)."""

    config: bytes
    manifest: bytes
    index: bytes
    manifest_descriptor: Descriptor


def image_docs(name: str, layers: Sequence[Layer], config: Mapping[str, Any],
               labels: Mapping[str, str] | None = None) -> ImageDocs:
    """Config, manifest and index for an image ``name`` (``registry/repo:tag``) made of ``layers``.

    ``config`` is the runtime part (``Entrypoint``, ``Cmd``, ``Env``, ``WorkingDir`` ...). The
    index carries both names ctr understands: the OCI ``ref.name`` (the tag) and containerd's own
    ``io.containerd.image.name`` (the full name it is imported as).
    """
    runtime = dict(config)
    if labels:
        runtime["Labels"] = dict(sorted(labels.items()))
    config_doc = {
        "architecture": "amd64",
        "os": "linux",
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
    }
    config_bytes = json_bytes(config_doc)
    manifest_doc = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": Descriptor(MEDIA_CONFIG, digest_of(config_bytes), len(config_bytes)).to_json(),
        "layers": [layer.descriptor.to_json() for layer in layers],
    }
    manifest_bytes = json_bytes(manifest_doc)
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    manifest_desc = Descriptor(
        MEDIA_MANIFEST, digest_of(manifest_bytes), len(manifest_bytes),
        annotations={REF_NAME: tag, CONTAINERD_NAME: name},
        platform={"architecture": "amd64", "os": "linux"},
    )
    index_doc = {"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [manifest_desc.to_json()]}
    return ImageDocs(config_bytes, manifest_bytes, json_bytes(index_doc), manifest_desc)


def write_archive(archive: Path, docs: ImageDocs, layers: Sequence[Layer], blob_dir: Path) -> None:
    """Write the OCI image layout of one image as a tar (what ``ctr images import`` reads).

    Layer blobs are copied from ``blob_dir``; the archive is written under a temporary name and
    renamed when complete.
    """
    archive.parent.mkdir(parents=True, exist_ok=True)
    blobs: dict[str, Entry] = {}
    for data in (docs.config, docs.manifest):
        path = f"blobs/sha256/{digest_of(data).split(':', 1)[1]}"
        blobs[path] = Entry(path, "file", 0o644, data=data)
    for layer in layers:
        path = f"blobs/sha256/{layer.descriptor.hex}"
        source = blob_dir / layer.descriptor.hex
        if not source.is_file() or source.stat().st_size != layer.descriptor.size:
            raise LayoutError(f"layer blob {source} is missing or not {layer.descriptor.size} bytes")
        blobs[path] = Entry(path, "file", 0o644, source=source)
    entries = [
        Entry("oci-layout", "file", 0o644, data=json_bytes({"imageLayoutVersion": "1.0.0"})),
        Entry("index.json", "file", 0o644, data=docs.index),
        *blobs.values(),
    ]
    tmp = archive.with_name(f".{archive.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            write_tar(entries, out)
        tmp.rename(archive)
    finally:
        tmp.unlink(missing_ok=True)
