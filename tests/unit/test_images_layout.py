"""Image building: OCI layout validity (image-spec v1.1.1 JSON schemas), digests, determinism, cache.

The schemas come from the Go module proxy (``github.com/opencontainers/image-spec@v1.1.1``), cached
by Go's module cache like the other downloads; validation is by ``jsonschema``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
from click.testing import CliRunner
from referencing.jsonschema import DRAFT4

from hollowscale.cluster.binaries import go_mod_download
from hollowscale.images import BUSYBOX_IMAGE, PAUSE_IMAGE, BuiltImage, ImageError, build_images, recipe_for
from hollowscale.images import pause as pause_mod
from hollowscale.images.build import build_recipe
from hollowscale.images.cli import images_group
from hollowscale.images.layout import (
    CONTAINERD_NAME,
    MEDIA_LAYER_GZIP,
    MEDIA_LAYER_TAR,
    REF_NAME,
    Entry,
    LayoutError,
    with_parents,
)
from hollowscale.images.recipe import Recipe, files_layer

IMAGE_SPEC = ("github.com/opencontainers/image-spec", "v1.1.1")


@pytest.fixture(scope="module")
def schema_dir() -> Path:
    """The image-spec's ``schema/`` directory from the Go module proxy (Go's module cache)."""
    return Path(go_mod_download(*IMAGE_SPEC)["Dir"]) / "schema"


@pytest.fixture(scope="module")
def validate(schema_dir: Path) -> Any:
    """``validate(doc, "image-manifest-schema.json")``: the spec's schemas refer to each other by
    file name under several base URIs, so every URI resolves by its last path segment."""

    def retrieve(uri: str) -> referencing.Resource[Any]:
        name = uri.rstrip("/").rsplit("/", 1)[-1]
        return DRAFT4.create_resource(json.loads((schema_dir / name).read_text()))

    registry: referencing.Registry[Any] = referencing.Registry(retrieve=retrieve)  # type: ignore[call-arg]

    def check(doc: Any, schema_name: str) -> None:
        schema = json.loads((schema_dir / schema_name).read_text())
        validator = jsonschema.Draft4Validator(schema, registry=registry, format_checker=jsonschema.FormatChecker())
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, f"{schema_name}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors)

    return check


@pytest.fixture(scope="module")
def small_images(tmp_path_factory: pytest.TempPathFactory) -> list[BuiltImage]:
    return build_images(("pause", "busybox"), cache=tmp_path_factory.mktemp("image-cache"))


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(files: dict[str, bytes], digest: str) -> bytes:
    return files["blobs/sha256/" + digest.split(":", 1)[1]]


def test_layout_is_valid_against_the_image_spec_schemas(small_images: list[BuiltImage], validate: Any) -> None:
    for image in small_images:
        files = _members(image.archive)
        validate(json.loads(files["oci-layout"]), "image-layout-schema.json")
        index = json.loads(files["index.json"])
        validate(index, "image-index-schema.json")
        (desc,) = index["manifests"]
        manifest = json.loads(_blob(files, desc["digest"]))
        validate(manifest, "image-manifest-schema.json")
        config = json.loads(_blob(files, manifest["config"]["digest"]))
        validate(config, "config-schema.json")
        for layer in manifest["layers"]:
            validate(layer, "content-descriptor.json")


def test_the_schema_check_rejects_a_broken_manifest(small_images: list[BuiltImage], validate: Any) -> None:
    files = _members(small_images[0].archive)
    manifest = json.loads(_blob(files, small_images[0].digest))
    manifest["config"]["digest"] = "sha256 no colon-separated algorithm"
    with pytest.raises(AssertionError, match="digest"):
        validate(manifest, "image-manifest-schema.json")
    del manifest["layers"]
    with pytest.raises(AssertionError, match="layers"):
        validate(manifest, "image-manifest-schema.json")


def test_digests_sizes_and_diff_ids_match_the_content(small_images: list[BuiltImage]) -> None:
    for image in small_images:
        files = _members(image.archive)
        index = json.loads(files["index.json"])
        (desc,) = index["manifests"]
        assert desc["annotations"][CONTAINERD_NAME] == image.name
        assert desc["annotations"][REF_NAME] == image.name.rsplit(":", 1)[1]
        assert desc["digest"] == image.digest
        manifest_bytes = _blob(files, desc["digest"])
        assert _sha(manifest_bytes) == desc["digest"] and len(manifest_bytes) == desc["size"]
        manifest = json.loads(manifest_bytes)
        config_bytes = _blob(files, manifest["config"]["digest"])
        assert _sha(config_bytes) == manifest["config"]["digest"] and len(config_bytes) == manifest["config"]["size"]
        config = json.loads(config_bytes)
        diff_ids = []
        for layer in manifest["layers"]:
            blob = _blob(files, layer["digest"])
            assert _sha(blob) == layer["digest"] and len(blob) == layer["size"]
            assert layer["mediaType"] in (MEDIA_LAYER_GZIP, MEDIA_LAYER_TAR)
            raw = gzip.decompress(blob) if layer["mediaType"] == MEDIA_LAYER_GZIP else blob
            diff_ids.append(_sha(raw))
        assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
        assert set(files) == {"oci-layout", "index.json", *(f"blobs/sha256/{d.split(':')[1]}" for d in [
            desc["digest"], manifest["config"]["digest"], *(layer["digest"] for layer in manifest["layers"])])}


def _layer_members(image: BuiltImage) -> list[tarfile.TarInfo]:
    files = _members(image.archive)
    manifest = json.loads(_blob(files, image.digest))
    members = []
    for layer in manifest["layers"]:
        with tarfile.open(fileobj=io.BytesIO(_blob(files, layer["digest"]))) as tar:
            members.extend(tar.getmembers())
    return members


def test_layers_are_deterministic_tars(small_images: list[BuiltImage]) -> None:
    pause, busybox = small_images
    for image in small_images:
        members = _layer_members(image)
        names = [m.name for m in members]
        assert names == sorted(names)
        assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and not m.uname for m in members)
    pause_members = {m.name: m for m in _layer_members(pause)}
    assert pause_members["pause"].isfile() and pause_members["pause"].mode == 0o755
    busybox_members = {m.name: m for m in _layer_members(busybox)}
    assert busybox_members["bin/sh"].issym() and busybox_members["bin/sh"].linkname == "/bin/busybox"
    for applet in ("bin/sleep", "usr/sbin/httpd", "usr/bin/nc", "usr/bin/wget"):
        assert applet in busybox_members, applet
    assert busybox_members["tmp"].mode == 0o1777


def test_pause_config_and_names(small_images: list[BuiltImage]) -> None:
    pause, busybox = small_images
    assert (pause.name, busybox.name) == (PAUSE_IMAGE, BUSYBOX_IMAGE)
    files = _members(pause.archive)
    manifest = json.loads(_blob(files, pause.digest))
    config = json.loads(_blob(files, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert (config["os"], config["architecture"]) == ("linux", "amd64")


@pytest.mark.integration  # starts a process
def test_two_builds_from_scratch_give_the_same_digests(small_images: list[BuiltImage], tmp_path: Path) -> None:
    again = build_images(("pause", "busybox"), cache=tmp_path)
    assert [i.digest for i in again] == [i.digest for i in small_images]
    assert [i.archive.read_bytes() for i in again] == [i.archive.read_bytes() for i in small_images]


@pytest.mark.integration  # starts a process
def test_second_build_is_a_cache_hit_without_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = build_images(("pause", "busybox"), cache=tmp_path)
    assert not any(i.cached for i in first)

    def no_compile(_workdir: Path) -> Path:
        raise AssertionError("the pause program was compiled again although nothing changed")

    monkeypatch.setattr(pause_mod, "compile_pause", no_compile)
    started = time.monotonic()
    messages: list[str] = []
    second = build_images(("pause", "busybox"), cache=tmp_path, progress=messages.append)
    assert time.monotonic() - started < 5
    assert all(i.cached for i in second)
    assert [i.digest for i in second] == [i.digest for i in first]
    assert not any("writing" in m for m in messages), messages


def test_a_changed_input_rebuilds_only_its_layer(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "stable.txt").write_text("stable")
    (src / "changing.txt").write_text("one")

    def recipe() -> Recipe:
        stable = files_layer("stable", lambda: [Entry("data/stable.txt", "file", 0o644, source=src / "stable.txt")])
        changing = files_layer("changing",
                               lambda: [Entry("data/changing.txt", "file", 0o644, source=src / "changing.txt")],
                               compress=False)
        return Recipe("test", "hollowscale.local/test:1", [stable, changing], {"Cmd": ["true"]})

    cache = tmp_path / "cache"
    first = build_recipe(recipe(), cache)
    (src / "changing.txt").write_text("two, longer")
    messages: list[str] = []
    second = build_recipe(recipe(), cache, messages.append)
    assert second.digest != first.digest and not second.cached
    assert any("layer 1/2 (stable): cached" in m for m in messages), messages
    assert any("layer 2/2 (changing): writing" in m for m in messages), messages
    assert not first.archive.exists(), "the superseded archive of the same image should be removed"
    # the superseded layer's blob and records are pruned; the stable layer's blob (still live) stays,
    # and a file of someone else's in the cache is left alone
    blobs = {p.name for p in (cache / "blobs").iterdir()}
    assert len(blobs) == 2, blobs
    assert len(list((cache / "images").glob("*.json"))) == 1
    (cache / "blobs" / "notes.txt").write_text("mine")
    (src / "changing.txt").write_text("three")
    third = build_recipe(recipe(), cache, messages.append)
    assert {p.name for p in (cache / "blobs").iterdir()} - {"notes.txt"} != blobs
    assert len(list((cache / "blobs").iterdir())) == 3 and (cache / "blobs" / "notes.txt").read_text() == "mine"
    assert third.archive.is_file() and any("pruned" in m for m in messages), messages


def test_entries_must_be_relative_and_unambiguous() -> None:
    with pytest.raises(LayoutError, match="relative"):
        Entry("/etc/passwd", "file", data=b"")
    with pytest.raises(LayoutError, match=r"\.\."):
        Entry("etc/../../x", "file", data=b"")
    with pytest.raises(LayoutError, match="two different"):
        with_parents([Entry("a", "file", data=b"1"), Entry("a", "file", data=b"2")])
    with pytest.raises(LayoutError, match="which is a file"):
        with_parents([Entry("a", "file", data=b"1"), Entry("a/b", "file", data=b"2")])
    assert [e.path for e in with_parents([Entry("x/y/z", "file", data=b"")])] == ["x", "x/y", "x/y/z"]


def test_unknown_image_names_are_refused() -> None:
    with pytest.raises(ImageError, match=r"unknown image 'nginx'.*pause, busybox, distill"):
        recipe_for("nginx")
    result = CliRunner().invoke(images_group, ["build", "--only", "pause,nginx"])
    assert result.exit_code == 2 and "nginx" in result.output


def test_cli_help_explains_the_images() -> None:
    result = CliRunner().invoke(images_group, ["build", "--help"])
    assert result.exit_code == 0
    for word in ("pause", "busybox", "distill-cpu", "distill-gpu", "--import-to", "imagePullPolicy: Never"):
        assert word in result.output


@pytest.mark.integration  # starts a process
def test_cli_builds_and_prints_name_digest_archive(tmp_path: Path) -> None:
    result = CliRunner().invoke(images_group, ["build", "--only", "pause", "--cache", str(tmp_path)])
    assert result.exit_code == 0, result.output
    name, digest, archive = result.stdout.strip().splitlines()[-1].split()
    assert name == PAUSE_IMAGE and digest.startswith("sha256:") and Path(archive).is_file()


@pytest.mark.integration  # starts a process
def test_pause_compile_error_is_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pause_mod, "PAUSE_C", "int main(void) { return undefined_thing; }\n")
    with pytest.raises(pause_mod.CompileError, match="gcc failed to build the pause program"):
        pause_mod.compile_pause(tmp_path)


def test_import_without_a_containerd_socket_fails_clearly(small_images: list[BuiltImage], tmp_path: Path) -> None:
    from hollowscale.images import import_images

    with pytest.raises(ImageError, match=r"no containerd socket at .*no\.sock"):
        import_images(small_images, "ctr", tmp_path / "no.sock")
