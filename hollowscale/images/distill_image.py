"""The distill image: the project's Python environment to run ``python -m distill`` as a container.

Layers, from least to most often changed (so a code change rewrites only the last, small one):

1. busybox (the same layer as the busybox image: ``/bin/sh`` and tools, ``/etc/passwd``, ``/tmp``);
2. the runtime: this machine's interpreter and standard library (tests, tkinter, idle, the static
   libpython left out) and every shared library the selected ELF files load (``ldd`` closure);
3. the wheels distill needs (``pyenv.distributions_for``), at ``/usr/local/lib/python3.11/site-packages``;
4. GPU variant only: the rest of the CUDA wheels (``nvidia-*``) and ``triton``;
5. Fashion-MNIST at ``/usr/share/datasets/fashion-mnist`` (where ``distill.data`` looks);
6. the project's packages distill imports, at ``/app`` (``PYTHONPATH=/app``).

CPU and GPU variants: PyPI's torch for Linux is the CUDA build, and ``libtorch_python.so`` links
``libtorch_cuda.so``, which links cuBLAS, cuFFT, cuSPARSE, NCCL, cuDNN's loader ... so ``import
torch`` needs those files even on a CPU. What it does not need are the libraries only
``dlopen``-ed on a GPU (cuDNN's engine libraries, the rest of the toolkit) and ``triton``; the CPU
variant keeps the ``ldd`` closure of the CUDA wheels and leaves the rest out.

The ``.pyc`` files already compiled next to the sources are kept, rewritten as "unchecked hash"
pycs: their validity no longer depends on the file's mtime (the tars have mtime 0), so the
container does not recompile torch on every start and the layer stays deterministic.
"""

from __future__ import annotations

import importlib.util
import os
import struct
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from hollowscale.images.layout import Entry, file_entry
from hollowscale.images.pyenv import (
    LddCache,
    distribution_files,
    distributions_for,
    library_closure,
    project_closure,
    runtime_files,
)
from hollowscale.images.recipe import LayerRecipe, Recipe, files_layer
from hollowscale.images.small import PATH_ENV, REGISTRY, busybox_recipe
from hollowscale.paths import REPO_ROOT

DISTILL_VERSION = "0.1.0"
DISTILL_IMAGE = f"{REGISTRY}/distill:{DISTILL_VERSION}"
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
IMAGE_PREFIX = "usr/local"
IMAGE_STDLIB = f"{IMAGE_PREFIX}/lib/python{PY_VERSION}"
IMAGE_SITE = f"{IMAGE_STDLIB}/site-packages"
IMAGE_LIBDIR = "usr/lib/x86_64-linux-gnu"  # on the loader's default path: no LD_LIBRARY_PATH needed
APP_DIR = "app"
DATASET_DIR = Path("/usr/share/datasets/fashion-mnist")
GPU_ONLY_PREFIXES = ("nvidia-", "triton")
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "site-packages", "lib2to3", "__pycache__"}
PYC_REWRITE_VERSION = "unchecked-hash-1"


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU (a driver's device node or proc entry)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def _site() -> Path:
    return Path(sysconfig.get_paths()["purelib"]).resolve()


def _base_prefix() -> Path:
    return Path(sys.base_prefix).resolve()


def _is_gpu_only(dist_name: str) -> bool:
    return dist_name.startswith(GPU_ONLY_PREFIXES)


# ---------------------------------------------------------------- pyc handling


def _pyc_for(source: Path) -> Path | None:
    pyc = Path(importlib.util.cache_from_source(str(source)))
    return pyc if pyc.is_file() else None


def unchecked_pyc(pyc: bytes, source: bytes, source_stat: os.stat_result) -> bytes | None:
    """``pyc`` rewritten as an unchecked hash-based pyc, or None when it is stale or not ours.

    The header is magic, flags, then mtime + size (flags 0) or the source hash (flags 1|2);
    a timestamp pyc is valid only if both match the source (what the import system checks).
    """
    if len(pyc) < 16 or pyc[:4] != importlib.util.MAGIC_NUMBER:
        return None
    flags = struct.unpack("<I", pyc[4:8])[0]
    if flags == 0:
        mtime, size = struct.unpack("<II", pyc[8:16])
        if mtime != int(source_stat.st_mtime) & 0xFFFFFFFF or size != source_stat.st_size & 0xFFFFFFFF:
            return None
    elif pyc[8:16] != importlib.util.source_hash(source):
        return None
    return pyc[:4] + struct.pack("<I", 0b01) + importlib.util.source_hash(source) + pyc[16:]


def with_pycs(entries: list[Entry]) -> list[Entry]:
    """Plan: add the existing ``__pycache__/*.pyc`` of every ``.py`` source entry (as plain files)."""
    out = list(entries)
    for entry in entries:
        if entry.kind == "file" and entry.source is not None and entry.path.endswith(".py"):
            pyc = _pyc_for(entry.source)
            if pyc is not None:
                image_path = str(Path(entry.path).parent / "__pycache__" / pyc.name)
                out.append(file_entry(image_path, pyc, 0o644))
    return out


def rewrite_pycs(entries: list[Entry], _workdir: Path) -> list[Entry]:
    """Transform: pyc entries become unchecked hash pycs; stale ones are dropped."""
    sources = {e.path: e.source for e in entries if e.source is not None and e.path.endswith(".py")}
    out: list[Entry] = []
    for entry in entries:
        if entry.source is None or not entry.path.endswith(".pyc"):
            out.append(entry)
            continue
        pyc_path = Path(entry.path)
        stem = pyc_path.name.split(".", 1)[0]
        source = sources.get(str(pyc_path.parent.parent / f"{stem}.py"))
        if source is None:
            continue
        data = source.read_bytes()
        rewritten = unchecked_pyc(entry.source.read_bytes(), data, source.stat())
        if rewritten is not None:
            out.append(Entry(entry.path, "file", 0o644, data=rewritten))
    return out


# ---------------------------------------------------------------- what goes in


class DistillPlan:
    """Everything the distill image holds, computed once per build (cheap: stats and ``ldd`` answers
    remembered by file)."""

    def __init__(self, gpu: bool, ldd_cache: Path | None = None) -> None:
        self.gpu = gpu
        self.root = REPO_ROOT  # the checkout holding the project's packages (distill beside hollowscale)
        self.site = _site()
        self.prefix = _base_prefix()
        self.ldd = LddCache(ldd_cache)
        self._done = False

    def compute(self) -> None:
        if self._done:
            return
        closure = project_closure(self.root, "distill")
        self.project_files = closure.files
        dists = distributions_for(closure.external, self.site)
        cpu_dists = {n: d for n, d in dists.items() if not _is_gpu_only(n)}
        gpu_dists = {n: d for n, d in dists.items() if _is_gpu_only(n)}
        self.site_files = sorted({f for d in cpu_dists.values() for f in distribution_files(d, self.site)}, key=str)
        gpu_files = sorted({f for d in gpu_dists.values() for f in distribution_files(d, self.site)},
                           key=str) if self.gpu else []
        self.stdlib_files = self._stdlib_files()
        self.interpreter = self.prefix / "bin" / f"python{PY_VERSION}"
        # the CPU closure decides layers 2 and 3, so both variants share them
        runtime = runtime_files(self.interpreter, self.stdlib_files, self.site_files, self.site, self.ldd)
        self.site_files = runtime.site_files
        self.system_libs = runtime.system_libs
        self.missing_libs = runtime.missing
        self.gpu_files: list[Path] = []
        self.gpu_system_libs: list[Path] = []
        if self.gpu:
            in_site = set(self.site_files)
            self.gpu_files = [f for f in gpu_files if f not in in_site]
            gpu_libs = library_closure(self.gpu_files, self.ldd)
            known = set(self.system_libs)
            site_str = str(self.site) + os.sep
            self.gpu_system_libs = [p for p in gpu_libs.libraries
                                    if not str(p.resolve()).startswith(site_str) and p not in known]
        self._done = True

    def _stdlib_files(self) -> list[Path]:
        stdlib = self.prefix / "lib" / f"python{PY_VERSION}"
        out: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(stdlib):
            rel = Path(dirpath).relative_to(stdlib)
            dirnames[:] = sorted(d for d in dirnames if d not in STDLIB_SKIP and not d.startswith("config-")
                                 and not (rel.parts and rel.parts[0] in STDLIB_SKIP))
            for name in sorted(filenames):
                if name.endswith(".pyc") or name.startswith("_tkinter"):
                    continue
                out.append(Path(dirpath) / name)
        return out

    # -- layer plans ----------------------------------------------------------------------------

    def _site_entry(self, path: Path) -> Entry:
        return file_entry(f"{IMAGE_SITE}/{path.relative_to(self.site)}", path)

    def runtime_entries(self) -> list[Entry]:
        self.compute()
        stdlib = self.prefix / "lib" / f"python{PY_VERSION}"
        entries = [
            file_entry(f"{IMAGE_PREFIX}/bin/python{PY_VERSION}", self.interpreter, 0o755),
            Entry(f"{IMAGE_PREFIX}/bin/python3", "symlink", 0o777, target=f"python{PY_VERSION}"),
            Entry(f"{IMAGE_PREFIX}/bin/python", "symlink", 0o777, target=f"python{PY_VERSION}"),
            *(file_entry(f"{IMAGE_STDLIB}/{p.relative_to(stdlib)}", p) for p in self.stdlib_files),
        ]
        entries.extend(self._system_lib_entries(self.system_libs, with_top_links=True))
        return with_pycs(entries)

    def _system_lib_entries(self, libs: list[Path], with_top_links: bool) -> list[Entry]:
        """System libraries at their real (merged-/usr) paths, symlink chains kept, plus the
        top-level ``lib``/``lib64`` links the loader path ``/lib64/ld-linux-x86-64.so.2`` needs;
        libraries of the interpreter's own prefix (libpython) go to the default library dir."""
        entries: dict[str, Entry] = {}
        for top in ("lib", "lib64") if with_top_links else ():
            host = Path("/") / top
            if host.is_symlink():
                entries[top] = Entry(top, "symlink", 0o777, target=os.readlink(host))
        prefix = str(self.prefix) + os.sep
        for lib in libs:
            path = Path(os.path.realpath(lib.parent)) / lib.name
            while True:
                own = str(path).startswith(prefix)  # libpython: to the default library dir
                image_path = f"{IMAGE_LIBDIR}/{path.name}" if own else str(path).lstrip("/")
                if path.is_symlink():
                    target = os.readlink(path)
                    entries[image_path] = Entry(image_path, "symlink", 0o777, target=target)
                    following = path.parent / target
                    path = Path(os.path.realpath(following.parent)) / following.name
                    continue
                entries[image_path] = file_entry(image_path, path)
                break
        return list(entries.values())

    def site_entries(self) -> list[Entry]:
        self.compute()
        return with_pycs([self._site_entry(p) for p in self.site_files])

    def gpu_entries(self) -> list[Entry]:
        self.compute()
        return with_pycs([*(self._site_entry(p) for p in self.gpu_files),
                          *self._system_lib_entries(self.gpu_system_libs, with_top_links=False)])

    def project_entries(self) -> list[Entry]:
        self.compute()
        return [file_entry(f"{APP_DIR}/{rel}", self.root / rel, 0o644) for rel in self.project_files]


def dataset_entries() -> list[Entry]:
    from hollowscale.images.build import ImageError

    files = sorted(DATASET_DIR.glob("*-ubyte*")) if DATASET_DIR.is_dir() else []
    if len(files) < 4:
        raise ImageError(f"Fashion-MNIST not found in {DATASET_DIR} (4 idx files expected): "
                         "sudo apt-get install -y dataset-fashion-mnist")
    return [file_entry(str(p).lstrip("/"), p, 0o644) for p in files]


def default_ldd_cache() -> Path:
    """Where the ``ldd`` answers are remembered between builds (the images cache)."""
    from hollowscale.images.build import images_cache_root

    return images_cache_root() / "ldd.json"


def python_layer(title: str, entries: Callable[[], list[Entry]], compress: bool, pycs: bool = True) -> LayerRecipe:
    """A layer of a Python image; with ``pycs`` its ``.pyc`` files are rewritten as unchecked-hash pycs."""
    return files_layer(title, entries, compress=compress, transform=rewrite_pycs if pycs else None,
                       extra=PYC_REWRITE_VERSION if pycs else "")


def distill_recipe(gpu: bool, ldd_cache: Path | None = None) -> Recipe:
    """The distill image's recipe, CPU (``gpu=False``) or GPU variant; both tagged DISTILL_IMAGE."""
    plan = DistillPlan(gpu, ldd_cache or default_ldd_cache())
    variant = "gpu" if gpu else "cpu"
    layer = python_layer
    layers = [
        busybox_recipe().layers[0],
        layer("Python runtime and shared libraries", plan.runtime_entries, compress=True),
        layer("site-packages distill needs", plan.site_entries, compress=False),
    ]
    if gpu:
        layers.append(layer("CUDA wheels and triton (GPU variant)", plan.gpu_entries, compress=False))
    layers += [
        layer("Fashion-MNIST", dataset_entries, compress=False, pycs=False),
        layer("project packages (/app)", plan.project_entries, compress=True, pycs=False),
    ]
    config = {
        "Entrypoint": ["python", "-m", "distill"],
        "Cmd": ["--help"],
        "Env": [PATH_ENV, f"PYTHONPATH=/{APP_DIR}", "PYTHONUNBUFFERED=1", "HOME=/root", "LANG=C.UTF-8"],
        "WorkingDir": f"/{APP_DIR}",
    }
    labels = {"org.opencontainers.image.title": "hollowscale distill", "hollowscale.variant": variant}
    return Recipe(f"distill-{variant}", DISTILL_IMAGE, layers, config, labels)
