"""The Go toolchain the control-plane build uses: a Go >= 1.26 the user has, else the pinned one, fetched.

Why fetch at all: Debian 12's ``golang`` is Go 1.19 and Kubernetes v1.36 needs Go 1.26, and a newcomer
should not have to install Go by hand.  Why this way: the Go module proxy already serves every module the
build needs, and it serves the toolchain too, as the module ``golang.org/toolchain`` at
``v0.0.1-go1.26.8.linux-amd64``: the artifact the go command's own ``GOTOOLCHAIN`` switch downloads.  So a
machine that can build the control plane can fetch its Go from the same place (``GOPROXY`` honoured), and
nothing is installed system-wide: the toolchain is unpacked into ``cache_root()/go/<version>.<platform>/``.

What makes it safe to run from an installer:

- the zip is checked against the SHA-256 pinned in :mod:`hollowscale.versions` (and its go.sum ``h1:``
  hash, as the checksum database records it), before a single file of it is used;
- it is downloaded and unpacked into a fresh folder beside the final one, checked (``bin/go version``
  prints the pinned release), given a marker (:data:`MARKER`) and only then renamed into place: an
  interrupted or refused fetch never leaves a half-done toolchain, and a refused one leaves nothing;
- a second run finds the marker (the pinned checksum in it) and downloads nothing;
- a Go on PATH (or at :data:`GO_DEFAULT`, go.dev's install folder) that is new enough is still preferred.

Why only the standard library: ``scripts/setup.sh`` runs this module with the system ``python3``
(``python3 -m hollowscale.gotoolchain``) before the virtual environment exists, so it imports nothing but
the standard library and two standard-library-only leaves, :mod:`hollowscale.paths` and
:mod:`hollowscale.versions` (``tests/unit/test_go_toolchain_fetch.py`` checks this).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from hollowscale.paths import cache_root
from hollowscale.versions import GO_TOOLCHAIN_H1, GO_TOOLCHAIN_PLATFORM, GO_TOOLCHAIN_SHA256, GO_TOOLCHAIN_VERSION

#: the oldest Go toolchain that builds the pinned versions (k8s.io/kubernetes v1.36's go.mod says go 1.26)
GO_MIN = (1, 26)
#: where Go's own installer (https://go.dev/dl) puts it; a non-login shell may not have it on PATH
GO_DEFAULT = "/usr/local/go/bin/go"
#: colon-separated places to look for a go besides PATH (default :data:`GO_DEFAULT`; set but empty: none), so a
#: test can stand for a machine without Go without moving system files
SEARCH_VAR = "HOLLOWSCALE_GO_SEARCH"
#: the proxy the go command uses when GOPROXY names none
DEFAULT_PROXY = "https://proxy.golang.org"
MODULE = "golang.org/toolchain"
#: written into a fetched toolchain's folder last, before the rename: what was fetched, from where, its checksum
MARKER = "HOLLOWSCALE-FETCHED.json"
#: seconds a connection (and each read) may stall before the attempt counts as failed
TIMEOUT_S = 30.0
#: attempts at a download that meets a transient network error (connection, timeout, HTTP 5xx/429)
ATTEMPTS = 4
#: seconds between progress lines of a download (it is ~70 MB)
PROGRESS_EVERY_S = 3.0
_CHUNK = 1 << 20
_RELEASE_RE = re.compile(r"\bgo(\d+)\.(\d+)[^\s]*")
#: Python's names of machine architectures -> Go's
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm",
           "armv6l": "arm", "i386": "386", "i686": "386", "ppc64le": "ppc64le", "s390x": "s390x",
           "riscv64": "riscv64", "loongarch64": "loong64"}

ProgressFn = Callable[[str], None]
#: opens a URL with a timeout; returns a response with ``.headers`` and ``.read(n)`` (``urllib.request.urlopen``)
Opener = Callable[[str, float], Any]


class ToolchainError(RuntimeError):
    """No usable Go and none could be fetched; the message says what was found, tried, and what to do."""


def say(msg: str) -> None:
    """Progress on stderr: the module's stdout carries only its answer (for ``scripts/setup.sh``)."""
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ Go on the machine
def parse_release(text: str) -> str | None:
    """The release in ``go version`` output (``go version go1.26.8 linux/amd64`` -> ``go1.26.8``), or None."""
    m = _RELEASE_RE.search(text)
    return m[0] if m else None


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of the release in ``go version`` output (``go1.19.8`` -> (1, 19)), or None."""
    m = _RELEASE_RE.search(text)
    return (int(m[1]), int(m[2])) if m else None


def new_enough(version: tuple[int, int] | None) -> bool:
    """Whether a Go of this (major, minor) builds the pinned versions (>= :data:`GO_MIN`)."""
    return version is not None and version >= GO_MIN


@functools.lru_cache(maxsize=16)
def go_version_line(go: str) -> str:
    """What the toolchain at ``go`` itself says to ``go version`` ("" when it does not run).

    ``GOTOOLCHAIN=local``: the version of this binary, not of a newer toolchain it would switch to.
    """
    try:
        return subprocess.run([go, "version"], capture_output=True, text=True, timeout=60,
                              env=go_env(go, os.environ)).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def go_version(go: str) -> tuple[int, int] | None:
    """(major, minor) of the toolchain at ``go`` itself, or None when it does not run or say."""
    return parse_version(go_version_line(go))


def search_list(default: str = GO_DEFAULT) -> list[str]:
    """Where to look for a go besides PATH: ``$HOLLOWSCALE_GO_SEARCH`` (colon-separated) when set, else ``default``."""
    given = os.environ.get(SEARCH_VAR)
    return [default] if given is None else [p for p in given.split(os.pathsep) if p]


def find_go(default: str = GO_DEFAULT) -> tuple[str | None, list[str]]:
    """The first of PATH's ``go`` and :func:`search_list` that is >= 1.26, and each older one met before it
    (``go1.19 at /usr/bin/go``).  Looking past an old ``go`` on PATH to Go's default install folder is what a
    machine with the distro's older golang beside a go.dev install needs."""
    candidates = dict.fromkeys(p for p in (shutil.which("go"), *search_list(default)) if p and os.access(p, os.X_OK))
    older: list[str] = []
    for go in candidates:
        version = go_version(go)
        if new_enough(version):
            return go, older
        older.append(f"{'go{}.{}'.format(*version) if version else 'a go that does not tell its version'} at {go}")
    return None, older


# ------------------------------------------------------------------------------------ the pinned toolchain
def host_platform() -> str:
    """This machine as Go names a platform (``linux-amd64``, ``linux-arm64``, ...)."""
    machine = platform.machine().lower()
    return f"{sys.platform}-{_GOARCH.get(machine, machine)}"


def module_version(release: str = GO_TOOLCHAIN_VERSION, plat: str = GO_TOOLCHAIN_PLATFORM) -> str:
    """The ``golang.org/toolchain`` version of a Go release on a platform (``v0.0.1-go1.26.8.linux-amd64``)."""
    return f"v0.0.1-{release}.{plat}"


def proxy_url(goproxy: str | None) -> str:
    """The module proxy to fetch from: the first entry of ``GOPROXY`` that is a URL, else :data:`DEFAULT_PROXY`.

    GOPROXY is a list separated by ``,`` or ``|``; ``direct`` (the module's own repository, which a zip of
    a toolchain has not) is skipped; ``off`` before any URL means the user forbade module downloads, which
    is said rather than overridden.
    """
    for entry in re.split(r"[,|]", goproxy or ""):
        entry = entry.strip()
        if entry == "off":
            raise ToolchainError(
                f"GOPROXY={goproxy} turns module downloads off, and the pinned Go toolchain comes from the Go module "
                f"proxy: set GOPROXY to a proxy (default {DEFAULT_PROXY}) or put a Go >= 1.26 on PATH, then rerun")
        if re.match(r"(https?|file)://", entry):
            return entry.rstrip("/")
    return DEFAULT_PROXY


def zip_url(proxy: str, version: str) -> str:
    """The proxy's URL of ``golang.org/toolchain@version``'s zip (the GOPROXY protocol's ``/@v/<version>.zip``)."""
    return f"{proxy}/{MODULE}/@v/{version}.zip"


def toolchain_dir(root: Path | None = None, release: str = GO_TOOLCHAIN_VERSION,
                  plat: str = GO_TOOLCHAIN_PLATFORM) -> Path:
    """Where the fetched toolchain lives (whether fetched or not): ``cache_root()/go/<release>.<platform>``."""
    return (root or cache_root()) / "go" / f"{release}.{plat}"


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The marker of a fetched toolchain's folder, or None when there is none (or it is not ours)."""
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def cached_go(root: Path | None = None, sha256: str = GO_TOOLCHAIN_SHA256) -> Path | None:
    """The fetched toolchain's ``bin/go`` when it is in the cache: its marker holds the pinned checksum (a fetch
    writes it only after every check passed) and ``bin/go`` is executable.  Starts no process."""
    folder = toolchain_dir(root)
    marker = read_marker(folder)
    go = folder / "bin" / "go"
    if marker is None or marker.get("sha256") != sha256 or not os.access(go, os.X_OK):
        return None
    return go


def is_fetched(go: str, root: Path | None = None) -> bool:
    """Whether ``go`` is the fetched toolchain's (by its folder, as PATH or :func:`cached_go` name it)."""
    return Path(go).parent == toolchain_dir(root) / "bin"


def go_env(go: str, env: Mapping[str, str]) -> dict[str, str]:
    """The environment to run ``go`` with: ``GOTOOLCHAIN=local``, and for the fetched toolchain no ``GOROOT``
    either (a GOROOT of another Go would mix two toolchains); the build stays on the checked binary."""
    out = dict(env, GOTOOLCHAIN="local")
    if is_fetched(go):
        out.pop("GOROOT", None)
    return out


@dataclass(frozen=True)
class Fetched:
    """What a fetch brought: from where, how big, its checksums, and the folder it is in."""

    url: str
    size: int
    sha256: str
    h1: str
    folder: Path

    @property
    def go(self) -> Path:
        """The toolchain's go command."""
        return self.folder / "bin" / "go"


def dirhash_h1(files: Iterable[tuple[str, str]]) -> str:
    """Go's go.sum hash (``h1:``, golang.org/x/mod/sumdb/dirhash ``Hash1``) of a module zip's files, given each
    file's name in the zip and the SHA-256 (hex) of its content: what the checksum database records."""
    lines = []
    for name, digest in sorted(files):
        if "\n" in name:
            raise ToolchainError(f"a file name with a newline in the module zip: {name!r}")
        lines.append(f"{digest}  {name}\n")
    return "h1:" + base64.b64encode(hashlib.sha256("".join(lines).encode()).digest()).decode()


def _open(url: str, timeout: float) -> Any:
    return urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "hollowscale-setup"}),
                                  timeout=timeout)


class _Truncated(OSError):
    """The body ended before its Content-Length: a dropped connection, worth another attempt."""


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def _download_once(url: str, dest: Path, opener: Opener, timeout: float, progress: ProgressFn,
                   every_s: float, clock: Callable[[], float]) -> tuple[int, str]:
    digest = hashlib.sha256()
    got = 0
    started = last = clock()
    with opener(url, timeout) as resp, open(dest, "wb") as out:
        total = int(resp.headers.get("Content-Length") or 0) or None
        progress(f"  {_mb(total)} MB to download" if total else "  size not announced by the server")
        while chunk := resp.read(_CHUNK):
            digest.update(chunk)
            try:
                out.write(chunk)
            except OSError as exc:  # the disk, not the network: another attempt would not help
                raise ToolchainError(f"cannot write {dest}: {exc}") from None
            got += len(chunk)
            now = clock()
            if now - last >= every_s:
                last = now
                progress(f"  {_mb(got)} of {_mb(total)} MB ({100 * got // total}%)" if total else f"  {_mb(got)} MB")
    if total is not None and got != total:
        raise _Truncated(f"the body ended at {got:,} of {total:,} bytes")
    elapsed = clock() - started
    progress(f"  {_mb(got)} MB in {elapsed:.1f}s" + (f" ({_mb(int(got / elapsed))} MB/s)" if elapsed > 0 else ""))
    return got, digest.hexdigest()


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    if isinstance(exc, urllib.error.URLError):
        return not isinstance(exc.reason, FileNotFoundError | PermissionError)
    return isinstance(exc, OSError | http.client.HTTPException)


def download(url: str, dest: Path, *, opener: Opener = _open, timeout: float = TIMEOUT_S, attempts: int = ATTEMPTS,
             sleep: Callable[[float], None] = time.sleep, progress: ProgressFn = say,
             every_s: float = PROGRESS_EVERY_S, clock: Callable[[], float] = time.monotonic) -> tuple[int, str]:
    """Download ``url`` into ``dest``: (size, SHA-256 hex).  A transient error (connection refused or reset,
    timeout, a cut body, HTTP 5xx or 429) is tried again from the start, ``attempts`` times in all with a
    doubling pause; anything else (HTTP 404: the proxy does not serve it) fails at once."""
    for attempt in range(1, attempts + 1):
        try:
            return _download_once(url, dest, opener, timeout, progress, every_s, clock)
        except Exception as exc:
            if not _transient(exc):
                raise ToolchainError(f"cannot fetch {url}: {exc}") from None
            if attempt == attempts:
                raise ToolchainError(f"cannot fetch {url}: {exc} ({attempts} attempts)") from None
            pause = 2.0 ** attempt
            progress(f"  {url}: {exc} (attempt {attempt} of {attempts}); trying again in {pause:.0f}s")
            sleep(pause)
    raise AssertionError("unreachable")


def unpack(zip_path: Path, into: Path, prefix: str) -> str:
    """Unpack a module zip whose files are all under ``prefix/`` into ``into`` (the prefix dropped); return its
    go.sum ``h1:`` hash.

    A zip keeps no Unix modes unless its writer put them in each entry's ``external_attr`` (the proxy's
    toolchain zips do: ``bin/go`` is 0755); :mod:`zipfile` ignores them, so the exec bits are restored from
    there (as 0755, every other file 0644).  A name outside the prefix, with ``..``, or a symlink is refused.
    """
    files: list[tuple[str, str]] = []
    with zipfile.ZipFile(zip_path) as archive:
        for info in archive.infolist():
            name = info.filename
            rel = PurePosixPath(name[len(prefix) + 1:]) if name.startswith(prefix + "/") else None
            if rel is None or rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ToolchainError(f"{name!r} in {zip_path.name} is not a file of {prefix}")
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ToolchainError(f"{name!r} in {zip_path.name} is a symbolic link, which no module zip holds")
            target = into.joinpath(*rel.parts)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with archive.open(info) as src, open(target, "xb") as dst:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    dst.write(chunk)
            target.chmod(0o755 if info.create_system == 3 and mode & 0o111 else 0o644)
            files.append((name, digest.hexdigest()))
    return dirhash_h1(files)


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return those this call made, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    made = []
    for p in missing:
        try:
            p.mkdir()
        except FileExistsError:
            continue
        made.append(p)
    return made


def fetch_toolchain(*, root: Path | None = None, proxy: str | None = None, release: str = GO_TOOLCHAIN_VERSION,
                    plat: str = GO_TOOLCHAIN_PLATFORM, sha256: str = GO_TOOLCHAIN_SHA256,
                    h1: str | None = GO_TOOLCHAIN_H1, opener: Opener = _open,
                    check: Callable[[Path], object] | None = None, progress: ProgressFn = say,
                    sleep: Callable[[float], None] = time.sleep) -> Fetched:
    """Fetch ``golang.org/toolchain`` of ``release`` on ``plat`` from ``proxy`` (default: GOPROXY's) into
    :func:`toolchain_dir`.

    Everything happens in a fresh folder beside the final one (same file system, so the last step is one
    rename): download, the SHA-256 against ``sha256``, unpack, the ``h1:`` hash against ``h1``, ``check`` on the
    unpacked tree (``bin/go version``: a process, so a unit test passes none), the marker.  Any failure or
    interrupt removes that folder and the cache folders this call created, so nothing is left behind.

    Raises:
        ToolchainError: the download failed, a checksum differs (naming the URL, the expected and the got
            hash), the zip is not a toolchain, or ``check`` refused it.
    """
    version = module_version(release, plat)
    url = zip_url(proxy_url(os.environ.get("GOPROXY")) if proxy is None else proxy, version)
    final = toolchain_dir(root, release, plat)
    made = _make_parents(final.parent)
    work = Path(tempfile.mkdtemp(prefix=f".fetching-{final.name}-", dir=final.parent))
    try:
        archive = work / f"{version}.zip"
        progress(f"  {url}")
        size, got = download(url, archive, opener=opener, progress=progress, sleep=sleep)
        if got != sha256:
            raise ToolchainError(
                f"the Go toolchain from {url} is not the pinned one (hollowscale/versions.py GO_TOOLCHAIN_SHA256): "
                f"expected sha256 {sha256}, got {got} ({size:,} bytes); nothing was kept")
        tree = work / "tree"
        tree.mkdir()
        got_h1 = unpack(archive, tree, f"{MODULE}@{version}")
        archive.unlink()
        if h1 is not None and got_h1 != h1:
            raise ToolchainError(f"the files of {url} do not hash to its go.sum line: expected {h1}, got {got_h1}; "
                                 f"nothing was kept")
        if not os.access(tree / "bin" / "go", os.X_OK):
            raise ToolchainError(f"{url} holds no executable bin/go; nothing was kept")
        if check is not None:
            check(tree)
        (tree / MARKER).write_text(json.dumps(
            {"module": MODULE, "version": version, "url": url, "size": size, "sha256": got, "h1": got_h1,
             "fetched": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2) + "\n")
        try:
            tree.rename(final)
        except OSError:
            if cached_go(root, sha256) is None:
                raise ToolchainError(f"cannot put the fetched toolchain at {final}: a folder is there that no "
                                     f"complete fetch made; remove it and rerun") from None
            progress(f"  another setup put the same toolchain at {final} meanwhile: using that one")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # a folder that is not empty is kept
                folder.rmdir()
        raise
    shutil.rmtree(work)
    return Fetched(url=url, size=size, sha256=got, h1=got_h1, folder=final)


def check_release(go: Path, release: str = GO_TOOLCHAIN_VERSION) -> str:
    """Run ``go version`` of a fetched tree's go (``GOTOOLCHAIN=local``, no GOROOT of another Go) and
    refuse it unless it says ``release``; return what it said."""
    env = dict(os.environ, GOTOOLCHAIN="local")
    env.pop("GOROOT", None)
    try:
        out = subprocess.run([str(go), "version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"the fetched {go} does not run: {exc}; nothing was kept") from None
    line = out.stdout.strip()
    if out.returncode != 0 or parse_release(line) != release:
        raise ToolchainError(f"the fetched {go} says {line or out.stderr.strip()!r} (exit {out.returncode}), "
                             f"not {release}; nothing was kept")
    return line


def ensure_go(*, root: Path | None = None, default: str = GO_DEFAULT, progress: ProgressFn = say,
              opener: Opener = _open, check: Callable[[Path], object] | None = None) -> tuple[Path, str]:
    """The Go that builds, and where it came from (``found``, ``cached`` or ``fetched``), said on ``progress``.

    A new enough Go on PATH or in :func:`search_list` first; else the toolchain fetched earlier; else the
    pinned one fetched now (only where the pin's platform is this machine's).  ``check`` runs on a fetched
    tree before it is put in place (default: :func:`check_release`).
    """
    go, older = find_go(default)
    if go is not None:
        progress(f"Go toolchain: {parse_release(go_version_line(go))} at {go} (>= {'{}.{}'.format(*GO_MIN)} needed)")
        return Path(go), "found"
    folder = toolchain_dir(root)
    cached = cached_go(root)
    if cached is not None:
        marker = read_marker(folder) or {}
        progress(f"Go toolchain: {GO_TOOLCHAIN_VERSION} at {cached}, fetched earlier from {marker.get('url')} "
                 f"(its marker holds the pinned sha256 {GO_TOOLCHAIN_SHA256}): using it")
        return cached, "cached"
    looked = search_list(default)
    where = (f"found only {' and '.join(older)}" if older else "found none") + \
        f" (looked on PATH{' and at ' + ', '.join(looked) if looked else ''})"
    need = f"the control-plane build needs Go >= {'{}.{}'.format(*GO_MIN)}"
    plat = host_platform()
    if plat != GO_TOOLCHAIN_PLATFORM:
        raise ToolchainError(
            f"{need} and {where}. Setup fetches Go only for {GO_TOOLCHAIN_PLATFORM}, the one platform whose checksum "
            f"is pinned (hollowscale/versions.py), and this machine is {plat}: install Go >= 1.26 for {plat} from "
            f"https://go.dev/dl and put it on PATH, then rerun")
    if folder.exists():
        raise ToolchainError(f"{need} and {where}, and {folder} holds no complete fetch of it (no marker with the "
                             f"pinned checksum): remove that folder and rerun")
    proxy = proxy_url(os.environ.get("GOPROXY"))  # GOPROXY=off is said before anything is fetched
    progress(f"Go: {need} and {where}: fetching the pinned {GO_TOOLCHAIN_VERSION} ({MODULE}@"
             f"{module_version()}) through the Go module proxy into {folder}")
    fetched = fetch_toolchain(root=root, proxy=proxy, opener=opener, progress=progress,
                              check=check or (lambda tree: check_release(tree / "bin" / "go")))
    progress(f"  fetched {fetched.url}: {fetched.size:,} bytes, sha256 {fetched.sha256} (as pinned), go.sum "
             f"{fetched.h1}; unpacked into {fetched.folder}")
    progress(f"Go toolchain: {GO_TOOLCHAIN_VERSION} at {fetched.go} (fetched; nothing installed system-wide)")
    return fetched.go, "fetched"


def main(argv: list[str] | None = None) -> int:
    """``python3 -m hollowscale.gotoolchain``: find or fetch the Go that builds; print its path and origin."""
    parser = argparse.ArgumentParser(
        prog="python3 -m hollowscale.gotoolchain",
        description="Find a Go >= 1.26 (PATH, then $HOLLOWSCALE_GO_SEARCH or /usr/local/go/bin/go), else the "
                    "pinned toolchain in the cache, else fetch it through the Go module proxy (GOPROXY). Prints "
                    "two lines: the go command's path and where it came from (found, cached, fetched).")
    parser.add_argument("--bin-dir", action="store_true",
                        help="print the folder the fetched toolchain's commands are (or would be) in, and stop")
    args = parser.parse_args(argv)
    if args.bin_dir:
        print(toolchain_dir() / "bin")
        return 0
    try:
        go, origin = ensure_go()
    except ToolchainError as exc:
        say(f"error: {exc}")
        return 1
    print(go)
    print(origin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
