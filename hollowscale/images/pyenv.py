"""Find what a Python program needs from this machine: project modules, distributions, shared libraries.

Why computed and not listed by hand: the distill image must hold exactly what ``python -m distill``
imports, and that changes with the code. Three closures, each from a source of truth:

- project modules: the ``import`` statements of the project's own code (AST, including imports
  inside functions), followed through the project's packages;
- third-party distributions: the top-level names those modules import, mapped to installed
  distributions, then their ``Requires-Dist`` (markers evaluated for this machine, no extras);
- shared libraries: ``ldd`` of every ELF file selected (the interpreter, ``lib-dynload``, the
  wheels' extensions and bundled libraries), resolved the way the loader resolves them here,
  RPATH ``$ORIGIN`` included. Libraries loaded only by ``dlopen`` (cuDNN's engines, the GPU driver's
  ``libcuda``) are not in it: that is what lets the CPU variant leave them out.
"""

from __future__ import annotations

import ast
import csv
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


class ClosureError(RuntimeError):
    """A dependency could not be found: the message names the importer and what is missing."""


# ---------------------------------------------------------------- project modules


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, module: str) -> set[str]:
    """Absolute names imported by the module at ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                prefix = f"{base}.{node.module}" if node.module else base
            else:
                prefix = node.module or ""
            names.add(prefix)
            names.update(f"{prefix}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


@dataclass(frozen=True)
class ProjectClosure:
    """The project files a package needs (relative to the project root) and the other top-level names."""

    files: tuple[Path, ...]
    external: tuple[str, ...]


def project_closure(root: Path, package: str) -> ProjectClosure:
    """All modules of ``package`` and every project module they import, transitively.

    A project package is a directory of ``root`` with an ``__init__.py``. Each reached module's
    parent packages come too (their ``__init__`` runs on import).
    """
    first_party = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    if package not in first_party:
        raise ClosureError(f"{root / package} is not a package (no __init__.py)")
    queue = [".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
             for p in sorted((root / package).rglob("*.py")) if "__pycache__" not in p.parts]
    seen: dict[str, Path] = {}
    external: set[str] = set()
    while queue:
        module = queue.pop()
        if module in seen:
            continue
        path = _module_file(root, module)
        if path is None:
            continue  # `from pkg import name` where name is not a module
        seen[module] = path
        parts = module.split(".")
        queue.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        for name in _imports(path, module):
            if name.split(".")[0] in first_party:
                queue.append(name)
            elif name:
                external.add(name.split(".")[0])
    stdlib = set(sys.stdlib_module_names)
    return ProjectClosure(
        files=tuple(sorted(p.relative_to(root) for p in seen.values())),
        external=tuple(sorted(n for n in external if n not in stdlib and n != "__future__")),
    )


# ---------------------------------------------------------------- distributions


def distributions_for(top_level: Iterable[str], site: Path) -> dict[str, md.Distribution]:
    """The installed distributions providing ``top_level`` names, plus their requirements, transitively.

    Names that no installed distribution provides are left out (optional imports behind
    ``try``/``except ImportError``); a requirement that is not installed is an error.
    """
    providers = md.packages_distributions()
    by_name: dict[str, md.Distribution] = {
        canonicalize_name(d.metadata["Name"]): d for d in md.distributions(path=[str(site)])}
    env = {"extra": ""}
    wanted: list[str] = []
    for name in top_level:
        wanted.extend(canonicalize_name(d) for d in providers.get(name, []))
    found: dict[str, md.Distribution] = {}
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        dist = by_name.get(name)
        if dist is None:
            raise ClosureError(f"distribution {name!r} is required but not installed in {site}")
        found[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                wanted.append(canonicalize_name(req.name))
    return dict(sorted(found.items()))


def distribution_files(dist: md.Distribution, site: Path) -> list[Path]:
    """The files a distribution installed under ``site`` (its RECORD; compiled ``.pyc`` left out,
    scripts outside site-packages left out). Plain strings inside: tens of thousands of files."""
    record = dist.read_text("RECORD")
    if record is None:
        raise ClosureError(f"distribution {dist.metadata['Name']} has no RECORD: cannot list its files")
    base = os.path.realpath(str(dist.locate_file("")))
    site_str = str(site) + os.sep
    out: list[Path] = []
    for row in csv.reader(record.splitlines()):
        if not row:
            continue
        path = os.path.normpath(os.path.join(base, row[0]))
        if path.startswith(site_str) and not path.endswith(".pyc") and os.path.isfile(path):
            out.append(Path(path))
    return out


# ---------------------------------------------------------------- shared libraries

_LDD_LINE = re.compile(r"^\s*(\S+)(?: => (\S+|not found))?(?: \(0x[0-9a-f]+\))?\s*$")


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


class LddCache:
    """``ldd`` answers per file, remembered by (path, size, mtime) in a JSON file: a cached build
    should not run the loader on hundreds of libraries again."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.known: dict[str, list[str]] = {}
        self.dirty = False
        if path and path.is_file():
            try:
                self.known = json.loads(path.read_text())
            except ValueError:
                self.known = {}

    def deps(self, lib: Path) -> list[str]:
        """Resolved paths of what ``lib`` loads (``not found`` entries as ``!name``)."""
        st = lib.stat()
        key = f"{lib}\0{st.st_size}\0{st.st_mtime_ns}"
        if key not in self.known:
            proc = subprocess.run(["ldd", str(lib)], capture_output=True, text=True)
            deps: list[str] = []
            for line in proc.stdout.splitlines():
                m = _LDD_LINE.match(line)
                if not m or "statically linked" in line or "linux-vdso" in line:
                    continue
                name, where = m.group(1), m.group(2)
                if where == "not found":
                    deps.append(f"!{name}")
                elif where:
                    deps.append(where)
                elif name.startswith("/"):
                    deps.append(name)  # the loader itself
            self.known[key] = deps
            self.dirty = True
        return self.known[key]

    def save(self) -> None:
        if self.path and self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
            tmp.write_text(json.dumps(self.known))
            tmp.rename(self.path)
            self.dirty = False


@dataclass(frozen=True)
class LibClosure:
    """Shared libraries needed (resolved host paths) and names the loader did not find here."""

    libraries: tuple[Path, ...]
    missing: tuple[str, ...]


def library_closure(roots: Iterable[Path], ldd: LddCache) -> LibClosure:
    """Every shared library the ELF files ``roots`` load, transitively (``ldd`` already recurses;
    we recurse again so libraries found only through a dependency's RPATH are followed too)."""
    queue = [p for p in roots if is_elf(p)]
    seen: set[Path] = set()
    missing: set[str] = set()
    libs: set[Path] = set()
    while queue:
        item = queue.pop()
        if item in seen:
            continue
        seen.add(item)
        for dep in ldd.deps(item):
            if dep.startswith("!"):
                missing.add(dep[1:])
                continue
            path = Path(dep)
            libs.add(path)
            queue.append(path)
    ldd.save()
    return LibClosure(tuple(sorted(libs)), tuple(sorted(missing)))


@dataclass(frozen=True)
class RuntimeFiles:
    """What a Python program's image holds besides its own code, split by layer.

    Attributes:
        site_files: the wheels' files plus the shared libraries inside site-packages they load
            (bundled ``.libs`` folders): they go with the wheels' layer.
        system_libs: the libraries from the system the interpreter, stdlib and wheels load.
        missing: sonames ``ldd`` could not resolve.
    """

    site_files: list[Path]
    system_libs: list[Path]
    missing: tuple[str, ...]


def runtime_files(interpreter: Path, stdlib_files: Iterable[Path], site_files: Iterable[Path], site: Path,
                  ldd: LddCache) -> RuntimeFiles:
    """The ``ldd`` closure of the interpreter, its stdlib and the wheels, split into what lives in
    site-packages and what comes from the system (the two image builders share this rule)."""
    site_list = list(site_files)
    libs = library_closure([interpreter, *stdlib_files, *site_list], ldd)
    site_str = str(site) + os.sep
    in_site = {p.resolve() for p in libs.libraries if str(p.resolve()).startswith(site_str)}
    return RuntimeFiles(site_files=sorted(set(site_list) | in_site, key=str),
                        system_libs=[p for p in libs.libraries if not str(p.resolve()).startswith(site_str)],
                        missing=libs.missing)
