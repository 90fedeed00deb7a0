"""Setup on a machine without Go (hollowscale/gotoolchain.py), with no process and no network.

The toolchain here is a fake one, served from a folder laid out as a Go module proxy (``file://`` GOPROXY):
two files, with the go.sum hash that Go's own dirhash gives them, so every check of a real fetch runs on
it: the SHA-256, the ``h1:`` hash, the exec bits, the rename into place, what is left after a refusal.
The real download is tests/integration/test_go_toolchain.py.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import pytest

from hollowscale import gotoolchain as gt
from hollowscale.cluster import binaries as bins_mod
from hollowscale.versions import GO_TOOLCHAIN_SHA256, GO_TOOLCHAIN_VERSION

FAKE_RELEASE = "go1.99.0"
FAKE_VERSION = gt.module_version(FAKE_RELEASE, "linux-amd64")
PREFIX = f"golang.org/toolchain@{FAKE_VERSION}"
#: the fake toolchain: file -> (content, mode)
FILES = {
    "bin/go": (b"#!/bin/sh\necho go version go1.99.0 linux/amd64\n", 0o755),
    "lib/time/x.txt": (b"not a program\n", 0o644),
}
#: what golang.org/x/mod/sumdb/dirhash.Hash1 (the go.sum hash) gives those two files under PREFIX, computed by Go
FAKE_H1 = "h1:Yf9wgDBhAURTOEiJdm06lde3BHZAjzmjoy6EnAU1ioU="


def _zip(files: dict[str, tuple[bytes, int]], prefix: str = PREFIX) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(f"{prefix}/{name}" if prefix else name)
            info.create_system = 3  # Unix: external_attr's high half is st_mode
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, data)
    return buf.getvalue()


def _proxy(tmp_path: Path, data: bytes | None = None) -> tuple[str, str]:
    """A file:// module proxy serving the fake toolchain (or ``data``) as FAKE_VERSION: (its URL, the zip's sha256)."""
    data = _zip(FILES) if data is None else data
    at = tmp_path / "proxy" / "golang.org" / "toolchain" / "@v"
    at.mkdir(parents=True)
    (at / f"{FAKE_VERSION}.zip").write_bytes(data)
    return (tmp_path / "proxy").as_uri(), hashlib.sha256(data).hexdigest()


def _fetch(tmp_path: Path, **kw: Any) -> gt.Fetched:
    lines: list[str] = kw.pop("lines", [])
    return gt.fetch_toolchain(root=tmp_path / "cache", release=FAKE_RELEASE, plat="linux-amd64",
                              progress=lines.append, sleep=lambda s: None, **kw)


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# ----------------------------------------------------------------------------------------------- GOPROXY
@pytest.mark.parametrize(("goproxy", "url"), [
    (None, "https://proxy.golang.org"),
    ("", "https://proxy.golang.org"),
    ("https://proxy.golang.org,direct", "https://proxy.golang.org"),
    ("direct,https://goproxy.example.org/", "https://goproxy.example.org"),
    ("https://a.example|https://b.example", "https://a.example"),
    (" http://10.0.0.1:3000 , direct", "http://10.0.0.1:3000"),
    ("file:///srv/goproxy", "file:///srv/goproxy"),
    ("direct", "https://proxy.golang.org"),
])
def test_the_proxy_is_goproxys_first_url(goproxy: str | None, url: str) -> None:
    assert gt.proxy_url(goproxy) == url


def test_goproxy_off_is_said_not_overridden() -> None:
    with pytest.raises(gt.ToolchainError, match=r"GOPROXY=off turns module downloads off"):
        gt.proxy_url("off")
    with pytest.raises(gt.ToolchainError, match=r"GOPROXY=direct,off"):
        gt.proxy_url("direct,off")
    assert gt.proxy_url("https://p.example,off") == "https://p.example"


def test_the_url_is_the_goproxy_protocols_zip() -> None:
    assert gt.zip_url("https://proxy.golang.org", gt.module_version()) == (
        f"https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-{GO_TOOLCHAIN_VERSION}.linux-amd64.zip")


# ------------------------------------------------------------------------------------------ the version
@pytest.mark.parametrize(("out", "version", "enough"), [
    ("go version go1.19.8 linux/amd64", (1, 19), False),  # Debian 12's golang
    ("go version go1.25.9 linux/amd64", (1, 25), False),
    ("go version go1.26.0 linux/amd64", (1, 26), True),
    ("go version go1.26.8 linux/amd64", (1, 26), True),
    ("go version go1.27rc1 linux/amd64", (1, 27), True),
    ("go version devel go1.28-4e1a2b3c Tue Jan 5 2027 linux/amd64", (1, 28), True),
    ("go version go2.0.1 linux/amd64", (2, 0), True),
    ("bash: go: command not found", None, False),
    ("", None, False),
])
def test_version_check(out: str, version: tuple[int, int] | None, enough: bool) -> None:
    assert gt.parse_version(out) == version
    assert gt.new_enough(version) is enough


def test_release_is_the_whole_word() -> None:
    assert gt.parse_release("go version go1.26.8 linux/amd64") == "go1.26.8"
    assert gt.parse_release("nothing") is None


# ------------------------------------------------------------------------------------------- the fetch
def test_fetch_unpacks_beside_then_renames_into_place_with_exec_bits(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url, sha = _proxy(tmp_path)
    monkeypatch.setenv("GOPROXY", f"direct,{url}")  # GOPROXY's first URL
    final = gt.toolchain_dir(tmp_path / "cache", FAKE_RELEASE, "linux-amd64")
    seen: dict[str, object] = {}

    def check(tree: Path) -> None:  # what the real check (bin/go version) sees: the tree before the rename
        seen.update(tree=tree, final_exists=final.exists(), go_mode=(tree / "bin" / "go").stat().st_mode & 0o777)

    lines: list[str] = []
    fetched = _fetch(tmp_path, sha256=sha, h1=FAKE_H1, check=check, lines=lines)
    assert seen["final_exists"] is False and seen["go_mode"] == 0o755
    assert isinstance(seen["tree"], Path) and seen["tree"].parent.parent == final.parent  # beside the final folder
    assert fetched.folder == final and fetched.go == final / "bin" / "go"
    assert fetched.url == f"{url}/golang.org/toolchain/@v/{FAKE_VERSION}.zip"
    assert (fetched.sha256, fetched.h1, fetched.size) == (sha, FAKE_H1, len(_zip(FILES)))
    assert (final / "bin" / "go").stat().st_mode & 0o777 == 0o755
    assert (final / "lib" / "time" / "x.txt").stat().st_mode & 0o777 == 0o644
    assert (final / "bin" / "go").read_bytes() == FILES["bin/go"][0]
    assert sorted(p.name for p in final.parent.iterdir()) == [final.name]  # the temp folder is gone
    marker = json.loads((final / gt.MARKER).read_text())
    assert {k: marker[k] for k in ("module", "version", "url", "sha256", "h1", "size")} == {
        "module": "golang.org/toolchain", "version": FAKE_VERSION, "url": fetched.url, "sha256": sha,
        "h1": FAKE_H1, "size": fetched.size}
    assert lines[0] == f"  {fetched.url}" and any("MB in" in line for line in lines)


def test_a_zip_without_exec_bits_is_refused(tmp_path: Path) -> None:
    data = _zip({"bin/go": (b"#!/bin/sh\n", 0o644)})
    url, sha = _proxy(tmp_path, data)
    with pytest.raises(gt.ToolchainError, match=r"holds no executable bin/go; nothing was kept"):
        _fetch(tmp_path, proxy=url, sha256=sha, h1=None)
    assert not (tmp_path / "cache").exists()


def test_checksum_mismatch_names_url_and_both_hashes_and_leaves_nothing(tmp_path: Path) -> None:
    url, sha = _proxy(tmp_path)
    (tmp_path / "cache").mkdir()  # a cache that was there stays, empty; what the fetch made goes
    pinned = "0" * 64
    with pytest.raises(gt.ToolchainError) as e:
        _fetch(tmp_path, proxy=url, sha256=pinned, h1=FAKE_H1)
    msg = str(e.value)
    assert f"{url}/golang.org/toolchain/@v/{FAKE_VERSION}.zip" in msg
    assert f"expected sha256 {pinned}, got {sha}" in msg and "nothing was kept" in msg
    assert _tree(tmp_path / "cache") == []


def test_h1_mismatch_leaves_nothing(tmp_path: Path) -> None:
    url, sha = _proxy(tmp_path)
    with pytest.raises(gt.ToolchainError, match=rf"expected h1:AAAA=, got {FAKE_H1}"):
        _fetch(tmp_path, proxy=url, sha256=sha, h1="h1:AAAA=")
    assert not (tmp_path / "cache").exists()


def test_a_refused_check_leaves_nothing(tmp_path: Path) -> None:
    url, sha = _proxy(tmp_path)

    def check(tree: Path) -> None:
        raise gt.ToolchainError(f"the fetched {tree / 'bin' / 'go'} says 'go1.1', not {FAKE_RELEASE}")

    with pytest.raises(gt.ToolchainError, match=r"not go1\.99\.0"):
        _fetch(tmp_path, proxy=url, sha256=sha, h1=FAKE_H1, check=check)
    assert not (tmp_path / "cache").exists()


def test_an_interrupted_download_leaves_nothing(tmp_path: Path) -> None:
    url, sha = _proxy(tmp_path)

    class Interrupted:
        headers: ClassVar[dict[str, str]] = {"Content-Length": "1000"}

        def __enter__(self) -> Interrupted:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read(self, n: int) -> bytes:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fetch(tmp_path, proxy=url, sha256=sha, h1=FAKE_H1, opener=lambda u, t: Interrupted())
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("name", ["../escape", "golang.org/toolchain@v0.0.1-go1.0.0.linux-amd64/bin/go",
                                  f"{PREFIX}/../../etc/passwd"])
def test_a_name_outside_the_module_is_refused(tmp_path: Path, name: str) -> None:
    url, sha = _proxy(tmp_path, _zip({name: (b"x", 0o755)}, prefix=""))
    with pytest.raises(gt.ToolchainError, match=r"is not a file of golang\.org/toolchain@"):
        _fetch(tmp_path, proxy=url, sha256=sha, h1=None)
    assert not (tmp_path / "cache").exists()


def test_transient_errors_are_tried_again_then_given_up(tmp_path: Path) -> None:
    url, sha = _proxy(tmp_path)
    calls: list[str] = []

    def flaky(u: str, timeout: float) -> Any:
        calls.append(u)
        if len(calls) < 3:
            raise urllib.error.URLError(ConnectionResetError(104, "Connection reset by peer"))
        return urllib.request.urlopen(u, timeout=timeout)

    lines: list[str] = []
    fetched = _fetch(tmp_path, proxy=url, sha256=sha, h1=FAKE_H1, opener=flaky, lines=lines)
    assert len(calls) == 3 and fetched.sha256 == sha
    assert sum("trying again" in line for line in lines) == 2

    def down(u: str, timeout: float) -> Any:
        raise TimeoutError("timed out")

    with pytest.raises(gt.ToolchainError, match=rf"cannot fetch .*timed out \({gt.ATTEMPTS} attempts\)"):
        gt.download(url, tmp_path / "z", opener=down, sleep=lambda s: None, progress=lambda m: None)


def test_a_404_is_not_tried_again(tmp_path: Path) -> None:
    calls: list[str] = []

    def missing(u: str, timeout: float) -> Any:
        calls.append(u)
        raise urllib.error.HTTPError(u, 404, "Not Found", {}, None)  # type: ignore[arg-type]

    with pytest.raises(gt.ToolchainError, match="HTTP Error 404"):
        gt.download("https://p.example/x.zip", tmp_path / "z", opener=missing, sleep=lambda s: None,
                    progress=lambda m: None)
    assert len(calls) == 1


def test_progress_every_few_seconds_with_size_and_percent(tmp_path: Path) -> None:
    src = tmp_path / "big"
    src.write_bytes(b"x" * 3_500_000)  # four reads of 1 MB
    ticks = iter(range(0, 1000, 5))
    lines: list[str] = []
    size, sha = gt.download(src.as_uri(), tmp_path / "got", progress=lines.append, every_s=3.0,
                            clock=lambda: float(next(ticks)))
    assert (size, sha) == (3_500_000, hashlib.sha256(src.read_bytes()).hexdigest())
    assert lines[0] == "  3.5 MB to download"
    assert lines[1:4] == ["  1.0 of 3.5 MB (29%)", "  2.1 of 3.5 MB (59%)", "  3.1 of 3.5 MB (89%)"]


def test_h1_is_gos_dirhash() -> None:
    assert gt.dirhash_h1((f"{PREFIX}/{n}", hashlib.sha256(d).hexdigest()) for n, (d, _) in FILES.items()) == FAKE_H1


# ------------------------------------------------------------------------- which Go, and a second run
def _no_go_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH without go, no other place to look, an empty cache: a machine without Go (no process is started)."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv(gt.SEARCH_VAR, "")
    monkeypatch.setenv("HOLLOWSCALE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _as_fetched(root: Path, sha256: str = GO_TOOLCHAIN_SHA256) -> Path:
    """The pinned toolchain's folder as a fetch leaves it: bin/go and the marker (its content is not run)."""
    folder = gt.toolchain_dir(root)
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "go").write_text("#!/bin/sh\n")
    (folder / "bin" / "go").chmod(0o755)
    (folder / gt.MARKER).write_text(json.dumps({"sha256": sha256, "url": "https://proxy.example/x.zip"}))
    return folder / "bin" / "go"


def _no_network(url: str, timeout: float) -> Any:
    raise AssertionError(f"fetched {url}")


def test_a_second_run_uses_the_fetched_toolchain_by_its_marker(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    go = _as_fetched(_no_go_here(tmp_path, monkeypatch))
    lines: list[str] = []
    assert gt.ensure_go(progress=lines.append, opener=_no_network) == (go, "cached")
    assert lines == [f"Go toolchain: {GO_TOOLCHAIN_VERSION} at {go}, fetched earlier from https://proxy.example/x.zip "
                     f"(its marker holds the pinned sha256 {GO_TOOLCHAIN_SHA256}): using it"]
    # and the control-plane build finds it too, outside setup.sh's PATH (`hollowscale setup` run directly)
    monkeypatch.setattr(bins_mod, "GO_DEFAULT", str(tmp_path / "usr-local-go" / "go"))
    monkeypatch.delenv(gt.SEARCH_VAR)
    assert bins_mod.go_binary() == str(go)
    assert gt.go_env(str(go), {"GOROOT": "/elsewhere", "GOTOOLCHAIN": "auto"}) == {"GOTOOLCHAIN": "local"}


def test_a_folder_without_the_pinned_marker_is_not_used_nor_overwritten(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _as_fetched(_no_go_here(tmp_path, monkeypatch), sha256="f" * 64)
    with pytest.raises(gt.ToolchainError, match=r"holds no complete fetch of it .*remove that folder and rerun"):
        gt.ensure_go(progress=lambda m: None, opener=_no_network)


def test_no_go_and_nothing_fetched_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _no_go_here(tmp_path, monkeypatch)
    monkeypatch.setattr(bins_mod, "GO_DEFAULT", str(tmp_path / "usr-local-go" / "go"))
    monkeypatch.delenv(gt.SEARCH_VAR)
    with pytest.raises(bins_mod.BuildError) as e:
        bins_mod.go_binary()
    assert f"nor a fetched one in {gt.toolchain_dir(cache)}" in str(e.value)
    assert "python3 -m hollowscale.gotoolchain" in str(e.value)


def test_another_architecture_is_asked_for_its_own_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _no_go_here(tmp_path, monkeypatch)
    monkeypatch.setattr(gt.platform, "machine", lambda: "aarch64")
    assert gt.host_platform() == f"{sys.platform}-arm64"
    with pytest.raises(gt.ToolchainError) as e:
        gt.ensure_go(progress=lambda m: None, opener=_no_network)
    msg = str(e.value)
    assert "fetches Go only for linux-amd64, the one platform whose checksum is pinned" in msg
    assert f"this machine is {sys.platform}-arm64: install Go >= 1.26" in msg and "put it on PATH" in msg
    assert not cache.exists()


def test_search_list_is_injectable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(gt.SEARCH_VAR, raising=False)
    assert gt.search_list("/usr/local/go/bin/go") == ["/usr/local/go/bin/go"]
    monkeypatch.setenv(gt.SEARCH_VAR, "")
    assert gt.search_list() == []
    monkeypatch.setenv(gt.SEARCH_VAR, "/opt/go/bin/go:/usr/lib/go-1.26/bin/go")
    assert gt.search_list() == ["/opt/go/bin/go", "/usr/lib/go-1.26/bin/go"]


def test_the_fetcher_imports_only_the_standard_library() -> None:
    """setup.sh runs it with the system python3 before the venv exists."""
    allowed = {"hollowscale.paths", "hollowscale.versions"}
    seen = {"hollowscale.gotoolchain", "hollowscale.__init__"}  # `python3 -m` runs the package's __init__ too
    todo = sorted(seen)
    while todo:
        module = todo.pop()
        path = Path(gt.__file__).parent / f"{module.removeprefix('hollowscale.')}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name in allowed and name not in seen:
                    seen.add(name)
                    todo.append(name)
                elif name not in allowed:
                    assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, (module, name)
    assert seen == {"hollowscale.gotoolchain", "hollowscale.__init__", *allowed}
