"""Build and cache the control-plane binaries from the Go module proxy.

Why build instead of download: this project runs where only package registries are reachable, and
the Go module proxy is one. We build ``kube-apiserver``, ``kube-controller-manager``,
``kube-scheduler`` and ``kubectl`` from ``k8s.io/kubernetes`` through a throw-away Go module of ours
that replaces every ``k8s.io/*`` staging module (``v0.0.0`` in the upstream go.mod, which points at
``./staging``) with its published ``v0.X.Y`` twin, and ``etcd`` from ``go.etcd.io/etcd/server/v3``.

The kubelet (for real nodes, :mod:`hollowscale.cluster.realnode`) is built from the same wrapper
module and cached beside them (``<version>/kubelet``) by :func:`ensure_kubelet`, on its own: a cache
that already holds the four control-plane binaries is not rebuilt to add it.

Binaries are cached per version outside the repo (``~/.cache/hollowscale/bin/<version>/``) and
written atomically (build into a temp dir, then rename), so a second ``make setup`` builds nothing
and an interrupted build never leaves a half-written cache entry behind.

The first build takes about ten minutes of Go on 2 cores, so each binary is its own ``go build`` (the
Go build cache shares what they have in common) and its start and end go to the progress callback as
:class:`Milestone` lines with the elapsed time: a log without a terminal still shows what is going on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hollowscale.gotoolchain import GO_DEFAULT, cached_go, find_go, go_env, is_fetched, search_list, toolchain_dir
from hollowscale.paths import cache_root
from hollowscale.versions import ETCD_VERSION, JOBSET_VERSION, KUBERNETES_VERSION, KUEUE_VERSION, STAGING_VERSION

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ProgressFn = Callable[[str], None]
GO_HINT = ("run `make setup` (it fetches the pinned Go toolchain into hollowscale's cache: "
           "python3 -m hollowscale.gotoolchain), or install Go >= 1.26 from https://go.dev/dl (distribution "
           "packages are often older) and put it on PATH, e.g. export PATH=/usr/local/go/bin:$PATH")


class Milestone(str):
    """A progress line worth keeping (a binary's build started or finished), unlike the passing
    package-by-package updates that share the same callback.

    One callback type for both keeps every caller's signature; a caller that shows a transient status
    line prints milestones above it (and a log without a terminal gets them as plain lines).
    """


class BuildError(RuntimeError):
    """A Go build failed; the message has the compiler's last lines and the command to retry."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the cached control-plane binaries."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path

    def missing(self) -> list[Path]:
        """The binaries that are not (yet) in the cache."""
        return [p for p in self.__dict__.values() if not os.access(p, os.X_OK)]


def binaries(root: Path | None = None) -> Binaries:
    """Where the binaries of the pinned versions live (whether built or not)."""
    root = root or cache_root()
    kube = root / "bin" / KUBERNETES_VERSION
    return Binaries(
        kube_apiserver=kube / "kube-apiserver",
        kube_controller_manager=kube / "kube-controller-manager",
        kube_scheduler=kube / "kube-scheduler",
        kubectl=kube / "kubectl",
        etcd=root / "bin" / f"etcd-{ETCD_VERSION}" / "etcd",
    )


#: Kubernetes commands built one at a time, on demand, into the control plane's cache dir: the kubelet for
#: real nodes; kubeadm and kube-proxy for a kind node image (:mod:`hollowscale.kindimage`)
NODE_COMMANDS = ("kubelet", "kubeadm", "kube-proxy")


def kube_command_binary(name: str, root: Path | None = None) -> Path:
    """Where ``name`` (one of :data:`NODE_COMMANDS`) of the pinned version lives, beside kube-apiserver
    (whether built or not)."""
    if name not in NODE_COMMANDS:
        raise ValueError(f"{name!r} is not one of {', '.join(NODE_COMMANDS)}")
    return binaries(root).kube_apiserver.parent / name


def kubelet_binary(root: Path | None = None) -> Path:
    """Where the kubelet of the pinned version lives (beside kube-apiserver; whether built or not)."""
    return kube_command_binary("kubelet", root)


def go_binary() -> str:
    """The Go toolchain that builds: the first of PATH's ``go`` and :data:`GO_DEFAULT` (or
    ``$HOLLOWSCALE_GO_SEARCH``) that is >= 1.26, else the pinned toolchain that setup fetched into the cache.

    Looking past an old ``go`` on PATH to Go's default install dir is what a machine with the distro's
    older golang package beside a go.dev install needs; the fetched one is what a machine without Go has
    (so ``hollowscale setup`` builds with it when called directly, outside scripts/setup.sh's PATH).

    Raises:
        BuildError: none found, or only older ones (each named with its version), with what to do.
    """
    go, older = find_go(GO_DEFAULT)
    if go is not None:
        return go
    fetched = cached_go()
    if fetched is not None:
        return str(fetched)
    looked = ", ".join(search_list(GO_DEFAULT)) or "no other place"
    if not older:
        raise BuildError(f"the control-plane build needs Go >= 1.26 and found none (no go on PATH, none at "
                         f"{looked}), nor a fetched one in {toolchain_dir()}: {GO_HINT}")
    raise BuildError(f"the control-plane build needs Go >= 1.26 and found only {' and '.join(older)}, and no "
                     f"fetched one in {toolchain_dir()}: {GO_HINT}")


def _elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def _output_name(package: str) -> str:
    """The file ``go build`` writes for a main package: its last path element, a ``/vN`` suffix skipped."""
    parts = package.split("/")
    return parts[-2] if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]) else parts[-1]


def _run_go(args: list[str], cwd: Path, progress: ProgressFn | None, what: str) -> None:
    """Run a go command, streaming package names to ``progress``; raise BuildError with its tail."""
    go = go_binary()
    env = dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0")
    # the fetched toolchain builds as itself (its checksum was checked); a user's Go may switch up (auto)
    env = go_env(go, env) if is_fetched(go) else {"GOTOOLCHAIN": "auto", **env}
    proc = subprocess.Popen(
        [go, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    tail: list[str] = []
    assert proc.stdout is not None
    for count, raw in enumerate(proc.stdout, start=1):
        line = raw.rstrip()
        tail = [*tail[-39:], line]
        if progress and line and not line.startswith("#"):
            progress(f"{what}: {count} packages, {line[-70:]}")
    rc = proc.wait()
    if rc != 0:
        text = "\n".join(tail)
        raise BuildError(
            f"{what} failed (go exit code {rc}) in {cwd}:\n{text}\n"
            f"Fix the cause above and retry with: make setup"
        )


def go_mod_download(module: str, version: str) -> dict[str, str]:
    """``go mod download -json module@version``: the module's ``Dir``, ``GoMod``, ... in the module cache."""
    out = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=dict(os.environ, GOFLAGS="-mod=mod"),
        cwd=tempfile.gettempdir(),
    )
    info: dict[str, str] = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "GoMod" not in info:
        raise BuildError(
            f"cannot fetch {module}@{version} from the Go module proxy: "
            f"{info.get('Error') or out.stderr.strip()}\nRetry with: make setup"
        )
    return info


def _kubernetes_gomod() -> str:
    """Text of the upstream k8s.io/kubernetes go.mod at the pinned version (from the module proxy)."""
    return Path(go_mod_download("k8s.io/kubernetes", KUBERNETES_VERSION)["GoMod"]).read_text()


def kube_wrapper_gomod(upstream_gomod: str) -> str:
    """go.mod of our wrapper module: require k8s.io/kubernetes, replace staging modules with v0.X.Y.

    The staging modules are exactly the ``k8s.io/*`` requirements pinned at ``v0.0.0`` upstream.
    """
    go_line = re.search(r"^go (\S+)$", upstream_gomod, re.M)
    staging = sorted(set(re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0$", upstream_gomod, re.M)))
    if not staging:
        raise BuildError("found no k8s.io staging modules in the upstream go.mod; has its format changed?")
    lines = [
        "// Generated by hollowscale.cluster.binaries: do not edit.",
        "module hollowscale.local/controlplane",
        "",
        f"go {go_line.group(1) if go_line else '1.26.0'}",
        "",
        f"require k8s.io/kubernetes {KUBERNETES_VERSION}",
        "",
        "replace (",
        *[f"\t{mod} => {mod} {STAGING_VERSION}" for mod in staging],
        ")",
        "",
    ]
    return "\n".join(lines)


def _ldflags() -> str:
    major, minor = KUBERNETES_VERSION.removeprefix("v").split(".")[:2]
    pairs = {
        "k8s.io/component-base/version.gitVersion": KUBERNETES_VERSION,
        "k8s.io/component-base/version.gitMajor": major,
        "k8s.io/component-base/version.gitMinor": minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/client-go/pkg/version.gitVersion": KUBERNETES_VERSION,
        "k8s.io/client-go/pkg/version.gitMajor": major,
        "k8s.io/client-go/pkg/version.gitMinor": minor,
    }
    return "-s -w " + " ".join(f"-X {k}={v}" for k, v in pairs.items())


def _build_into(final_dir: Path, gomod: str, packages: list[str], ldflags: str, what: str,
                progress: ProgressFn | None, rename: dict[str, str] | None = None) -> None:
    """Build ``packages`` in a fresh module dir and move the outputs to ``final_dir`` atomically.

    ``what`` names the release (``Kubernetes v1.36.3``) in progress and errors. Each package is its own
    ``go build`` (same flags, same outputs as one build of all: the Go build cache compiles what they
    share once), so each binary's start and end can be reported as a :class:`Milestone` with its time.
    ``rename`` maps Go's output names to ours (``go build`` names a binary after the last element
    of its package path without the major-version suffix: ``go.etcd.io/etcd/server/v3`` -> ``server``).
    """
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{final_dir.name}-", dir=final_dir.parent))
    try:
        (work / "go.mod").write_text(gomod)
        out = work / "out"
        out.mkdir()
        started = time.monotonic()
        each: dict[str, float] = {}
        for package in packages:
            name = (rename or {}).get(_output_name(package), _output_name(package))
            if progress:
                progress(Milestone(f"building {name} ({what}) ..."))
            t0 = time.monotonic()
            _run_go(["build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(out) + "/", package],
                    work, progress, f"building {name} ({what})")
            each[name] = round(time.monotonic() - t0, 1)
            if progress:
                progress(Milestone(f"built {name} in {_elapsed(each[name])}"))
        for built, wanted in (rename or {}).items():
            (out / built).rename(out / wanted)
        (out / "BUILD-INFO.json").write_text(json.dumps({
            "packages": packages,
            "go": subprocess.run([go_binary(), "version"], capture_output=True, text=True).stdout.strip(),
            "build_seconds": round(time.monotonic() - started, 1),
            "build_seconds_each": each,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }, indent=2))
        _install(out, final_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # our own temp dir (mkdtemp above)


def _install(out: Path, final_dir: Path) -> None:
    """Move a build's outputs into ``final_dir``: the whole dir at once when it is new, else file by file.

    Only the files this build wrote are replaced: whatever else ``final_dir`` holds (the kubelet beside a
    rebuilt control plane, another build's ``BUILD-INFO-*.json``, a file someone put there) stays.
    """
    if not final_dir.exists():
        out.rename(final_dir)
        return
    for item in out.iterdir():
        os.replace(item, final_dir / item.name)


def _build_file_into(final: Path, gomod: str, package: str, ldflags: str, what: str,
                     progress: ProgressFn | None) -> None:
    """Build one package and move its binary to ``final`` atomically, leaving the rest of its dir alone.

    :func:`_build_into` replaces a whole cache dir; the kubelet joins a dir that already holds the
    control-plane binaries, which must not be rebuilt (or removed) for it.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.parent.name}-{final.name}-", dir=final.parent.parent))
    staging = tmp / "out"
    try:
        _build_into(staging, gomod, [package], ldflags, what, progress)
        (staging / "BUILD-INFO.json").replace(final.parent / f"BUILD-INFO-{final.name}.json")
        (staging / final.name).replace(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # our own temp dir (mkdtemp above)


def ensure_kube_command(name: str, progress: ProgressFn | None = None, root: Path | None = None) -> Path:
    """Build ``k8s.io/kubernetes/cmd/<name>`` (one of :data:`NODE_COMMANDS`; same wrapper module and flags as
    the control plane, so ``kubeadm version`` says the pinned version) once, beside the control plane.

    Each takes about 30 s to a few minutes when the Go build cache is warm from the control-plane build.
    """
    binary = kube_command_binary(name, root)
    if not os.access(binary, os.X_OK):
        gomod = kube_wrapper_gomod(_kubernetes_gomod())
        _build_file_into(binary, gomod, f"k8s.io/kubernetes/cmd/{name}", _ldflags(),
                         f"Kubernetes {KUBERNETES_VERSION} {name}", progress)
    if not os.access(binary, os.X_OK):
        raise BuildError(f"build finished but {binary} is missing")
    return binary


def ensure_kubelet(progress: ProgressFn | None = None, root: Path | None = None) -> Path:
    """Build ``k8s.io/kubernetes/cmd/kubelet`` once (:func:`ensure_kube_command`), for real nodes."""
    return ensure_kube_command("kubelet", progress, root)


def module_tool_binary(name: str, version: str, root: Path | None = None) -> Path:
    """Where a tool built from one Go module (:func:`ensure_module_tool`) lives (whether built or not)."""
    return (root or cache_root()) / "bin" / f"{name}-{version}" / name


def ensure_module_tool(name: str, module: str, version: str, package: str, ldflags: str = "-s -w",
                       progress: ProgressFn | None = None, root: Path | None = None) -> Path:
    """Build ``package`` of ``module`` at ``version`` once (CGO off, -trimpath) into the cache as ``name``.

    Built through a throw-away module that requires only ``module``, so minimal version selection picks
    exactly the dependency versions of its own go.mod (what ``go install <package>@<version>`` builds);
    unlike ``go install``, this also builds a module whose go.mod has replace directives of its own.
    """
    binary = module_tool_binary(name, version, root)
    if not os.access(binary, os.X_OK):
        gomod = "\n".join([
            "// Generated by hollowscale.cluster.binaries: do not edit.",
            f"module hollowscale.local/{name}", "", "go 1.25", "",
            f"require {module} {version}", "",
        ])
        built = _output_name(package)
        _build_into(binary.parent, gomod, [package], ldflags, f"{name} {version}", progress,
                    rename={built: name} if built != name else None)
    if not os.access(binary, os.X_OK):
        raise BuildError(f"build finished but {binary} is missing")
    return binary


def kueue_binary(root: Path | None = None) -> Path:
    """Where the Kueue binary of the pinned version lives (whether built or not)."""
    return module_tool_binary("kueue", KUEUE_VERSION, root)


def ensure_kueue(progress: ProgressFn | None = None, root: Path | None = None) -> Path:
    """Build ``sigs.k8s.io/kueue/cmd/kueue`` at :data:`KUEUE_VERSION` once (:func:`ensure_module_tool`)."""
    return ensure_module_tool("kueue", "sigs.k8s.io/kueue", KUEUE_VERSION, "sigs.k8s.io/kueue/cmd/kueue",
                              f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}", progress, root)


def jobset_binary(root: Path | None = None) -> Path:
    """Where the JobSet binary of the pinned version lives (whether built or not)."""
    return module_tool_binary("jobset", JOBSET_VERSION, root)


def ensure_jobset(progress: ProgressFn | None = None, root: Path | None = None) -> Path:
    """Build ``sigs.k8s.io/jobset`` (its manager is the module's root package) at :data:`JOBSET_VERSION` once."""
    return ensure_module_tool("jobset", "sigs.k8s.io/jobset", JOBSET_VERSION, "sigs.k8s.io/jobset",
                              f"-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion={JOBSET_VERSION}", progress, root)


def ensure_binaries(progress: ProgressFn | None = None, root: Path | None = None,
                    kueue: bool = False, kubelet: bool = False, jobset: bool = False) -> Binaries:
    """Build whatever is missing from the cache; a no-op (milliseconds) when all are cached.

    ``kueue``: also build Kueue (:func:`ensure_kueue`); the test suite's setup asks for it.
    ``jobset``: also build JobSet (:func:`ensure_jobset`); the test suite's setup asks for it.
    ``kubelet``: also build the kubelet (:func:`ensure_kubelet`), for real nodes.
    """
    bins = binaries(root)
    if any(not os.access(p, os.X_OK) for p in
           (bins.kube_apiserver, bins.kube_controller_manager, bins.kube_scheduler, bins.kubectl)):
        gomod = kube_wrapper_gomod(_kubernetes_gomod())
        _build_into(bins.kube_apiserver.parent, gomod,
                    [f"k8s.io/kubernetes/cmd/{c}" for c in KUBE_COMMANDS], _ldflags(),
                    f"Kubernetes {KUBERNETES_VERSION}", progress)
    if not os.access(bins.etcd, os.X_OK):
        gomod = "\n".join([
            "// Generated by hollowscale.cluster.binaries: do not edit.",
            "module hollowscale.local/etcd", "", "go 1.24", "",
            f"require go.etcd.io/etcd/server/v3 {ETCD_VERSION}", "",
        ])
        _build_into(bins.etcd.parent, gomod, ["go.etcd.io/etcd/server/v3"], "-s -w",
                    f"etcd {ETCD_VERSION}", progress, rename={"server": "etcd"})
    missing = bins.missing()
    if missing:
        raise BuildError(f"build finished but these binaries are missing: {', '.join(map(str, missing))}")
    if kueue:
        ensure_kueue(progress, root)
    if jobset:
        ensure_jobset(progress, root)
    if kubelet:
        ensure_kubelet(progress, root)
    return bins


def main() -> None:
    """``python -m hollowscale.cluster.binaries [--kueue] [--jobset] [--kubelet]``: build what is missing, print
    where."""
    with_kueue = "--kueue" in sys.argv[1:]
    with_jobset = "--jobset" in sys.argv[1:]
    with_kubelet = "--kubelet" in sys.argv[1:]
    try:
        bins = ensure_binaries(lambda msg: print(msg, file=sys.stderr, flush=True), kueue=with_kueue,
                               kubelet=with_kubelet, jobset=with_jobset)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    for path in bins.__dict__.values():
        print(path)
    if with_kueue:
        print(kueue_binary())
    if with_jobset:
        print(jobset_binary())
    if with_kubelet:
        print(kubelet_binary())


if __name__ == "__main__":
    main()
