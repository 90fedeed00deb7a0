"""The agent image (hollow agent + Locust) and the Prometheus image, for in-cluster runs.

An ``agents.placement: in-cluster`` run puts the hollow agents, Locust's master and workers and a
Prometheus into pods (``deploy/hollowscale``).  There is no registry here, so both images are written
by our own code from this machine, the same way as the distill image
(:mod:`hollowscale.images.distill_image`), and imported into the real nodes' containerd.

Agent image layers, least to most often changed:

1. busybox (the layer the busybox image has: ``/bin/sh`` for the manifests' port arithmetic);
2. this machine's interpreter, standard library and the shared libraries they load (``ldd``);
3. the wheels ``hollow`` and ``loadgen`` import (aiohttp, uvloop, locust, gevent, pyzmq ...; no torch),
   with their ``Requires-Dist`` closure and the libraries their extensions load;
4. the project's packages they need (``hollow``, ``loadgen``, ``kubecore``) at ``/app`` with their
   data files (``hollow/stages.yaml``).

Prometheus image: busybox plus Debian's ``/usr/bin/prometheus`` (a Go binary; its ``ldd`` closure,
libc, comes too) at ``/bin/prometheus``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hollowscale.images.distill_image import APP_DIR, PY_VERSION, DistillPlan, default_ldd_cache, python_layer
from hollowscale.images.layout import Entry, file_entry
from hollowscale.images.pyenv import (
    LddCache,
    distribution_files,
    distributions_for,
    library_closure,
    project_closure,
    runtime_files,
)
from hollowscale.images.recipe import Recipe, files_layer
from hollowscale.images.small import PATH_ENV, REGISTRY, busybox_recipe

AGENT_VERSION = "0.1.0"
AGENT_IMAGE = f"{REGISTRY}/agent:{AGENT_VERSION}"
#: the project packages the agent image runs (``python -m hollow``, ``locust -f loadgen/locustfile.py``)
AGENT_PACKAGES = ("hollow", "loadgen")
PROMETHEUS_BINARY = Path("/usr/bin/prometheus")
DATA_SKIP_SUFFIXES = (".py", ".pyc", ".md")


def prometheus_version(binary: Path = PROMETHEUS_BINARY) -> str:
    """``2.42.0`` from ``prometheus --version`` (``0`` when it cannot be read: the tag only)."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return "0"
    for word in (out.stdout + out.stderr).split():
        if word[:1].isdigit() and word.count(".") >= 2:
            return re.sub(r"[^A-Za-z0-9_.-]", "-", word)  # Debian's 2.42.0+ds: '+' is not allowed in a tag
    return "0"


PROMETHEUS_IMAGE_REPO = f"{REGISTRY}/prometheus"


def prometheus_image() -> str:
    """The Prometheus image's reference (tagged with the binary's version)."""
    return f"{PROMETHEUS_IMAGE_REPO}:{prometheus_version()}"


class AgentPlan(DistillPlan):
    """What the agent image holds: the distill plan's runtime layer, other wheels and packages.

    Reuses :class:`DistillPlan`'s runtime and library handling (same interpreter, same layer 2 when the
    closures agree) and replaces what is computed from the project: the packages of
    :data:`AGENT_PACKAGES` instead of ``distill``, no GPU wheels.
    """

    def __init__(self, ldd_cache: Path | None = None) -> None:
        super().__init__(gpu=False, ldd_cache=ldd_cache)

    def compute(self) -> None:
        if self._done:
            return
        files: set[Path] = set()
        external: set[str] = set()
        for package in AGENT_PACKAGES:
            closure = project_closure(self.root, package)
            files.update(closure.files)
            external.update(closure.external)
        packages = {f.parts[0] for f in files}
        self.project_files = tuple(sorted(files | set(self._data_files(packages))))
        dists = distributions_for(sorted(external), self.site)
        self.site_files = sorted({f for d in dists.values() for f in distribution_files(d, self.site)}, key=str)
        self.stdlib_files = self._stdlib_files()
        self.interpreter = self.prefix / "bin" / f"python{PY_VERSION}"
        runtime = runtime_files(self.interpreter, self.stdlib_files, self.site_files, self.site, self.ldd)
        self.site_files = runtime.site_files
        self.system_libs = runtime.system_libs
        self.missing_libs = runtime.missing
        self.gpu_files = []
        self.gpu_system_libs = []
        self._done = True

    def _data_files(self, packages: set[str]) -> list[Path]:
        """Non-Python files shipped inside the packages (the agent reads ``hollow/stages.yaml``)."""
        out: list[Path] = []
        for package in sorted(packages):
            for path in sorted((self.root / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(DATA_SKIP_SUFFIXES):
                    out.append(path.relative_to(self.root))
        return out


def agent_recipe(ldd_cache: Path | None = None) -> Recipe:
    """The agent image's recipe (hollow agent, Locust with the locustfile, kubecore)."""
    plan = AgentPlan(ldd_cache or default_ldd_cache())
    layer = python_layer
    layers = [
        busybox_recipe().layers[0],
        layer("Python runtime and shared libraries", plan.runtime_entries, compress=True),
        layer("site-packages the agent and Locust need", plan.site_entries, compress=True),
        layer("project packages (/app)", plan.project_entries, compress=True, pycs=False),
    ]
    config = {
        "Entrypoint": ["python", "-m", "hollow"],
        "Cmd": ["--help"],
        "Env": [PATH_ENV, f"PYTHONPATH=/{APP_DIR}", "PYTHONUNBUFFERED=1", "HOME=/tmp", "LANG=C.UTF-8"],
        "WorkingDir": f"/{APP_DIR}",
    }
    labels = {"org.opencontainers.image.title": "hollowscale agent (hollow agent, Locust)"}
    return Recipe("agent", AGENT_IMAGE, layers, config, labels)


def prometheus_recipe(binary: Path = PROMETHEUS_BINARY, ldd_cache: Path | None = None) -> Recipe:
    """The Prometheus image: busybox and this machine's Prometheus binary with the libraries it loads."""

    def plan() -> list[Entry]:
        from hollowscale.images.build import ImageError

        if not binary.is_file():
            raise ImageError(f"{binary} not found: install Debian's prometheus (`apt-get install -y prometheus`)")
        entries = [file_entry("bin/prometheus", binary, 0o755), Entry("prometheus", "dir", 0o777)]
        libs = library_closure([binary], LddCache(ldd_cache))
        # the distill plan's library placement: real (merged-/usr) paths, symlink chains, lib/lib64 links
        entries += DistillPlan(gpu=False)._system_lib_entries(list(libs.libraries), with_top_links=True)
        return entries

    layers = [busybox_recipe().layers[0], files_layer("prometheus (Debian)", plan)]
    config = {"Entrypoint": ["/bin/prometheus"], "Env": [PATH_ENV], "WorkingDir": "/prometheus"}
    labels = {"org.opencontainers.image.title": "hollowscale prometheus"}
    return Recipe("prometheus", prometheus_image(), layers, config, labels)
