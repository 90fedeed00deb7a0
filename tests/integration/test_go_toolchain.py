"""Setup on a machine without Go: setup's Go step, with PATH stripped of every ``go`` and nothing at
go.dev's install folder, fetches the pinned toolchain through the Go module proxy into a scratch cache,
and its ``go version`` says the pinned release; a second run downloads nothing.

Costs a real download of 71.7 MB (the proxy of GOPROXY, default proxy.golang.org) and 215 MB on disk,
in a folder of the test's own under /tmp that is removed after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from hollowscale import gotoolchain as gt
from hollowscale.paths import REPO_ROOT
from hollowscale.versions import GO_TOOLCHAIN_H1, GO_TOOLCHAIN_PLATFORM, GO_TOOLCHAIN_SHA256, GO_TOOLCHAIN_VERSION

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _path_without_go() -> str:
    """This PATH less every folder that holds a go command."""
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not os.access(os.path.join(d, "go"), os.X_OK))


def _go_step(env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    return done, time.monotonic() - started


def test_setup_fetches_the_pinned_go_when_none_is_here(short_tmp_path: Path) -> None:
    cache = short_tmp_path / "cache"
    path = _path_without_go()
    assert shutil.which("go", path=path) is None
    env = {k: v for k, v in os.environ.items() if k not in ("GOROOT", "PYTHON", "GOTOOLCHAIN")}
    env.update(PATH=path, HOLLOWSCALE_CACHE=str(cache), GO_ONLY="1")
    env[gt.SEARCH_VAR] = ""  # nor at /usr/local/go/bin/go
    first, first_s = _go_step(env)
    output = first.stdout + first.stderr
    if gt.host_platform() != GO_TOOLCHAIN_PLATFORM:  # nothing pinned for this machine: it is said, nothing fetched
        assert first.returncode == 1, output
        assert f"fetches Go only for {GO_TOOLCHAIN_PLATFORM}" in output and "put it on PATH" in output
        assert not (cache / "go").exists()
        return
    assert first.returncode == 0, output
    folder = gt.toolchain_dir(cache)
    go = folder / "bin" / "go"
    url = gt.zip_url(gt.proxy_url(os.environ.get("GOPROXY")), gt.module_version())
    assert f"fetching the pinned {GO_TOOLCHAIN_VERSION}" in output
    assert f"fetched {url}: " in output and f"sha256 {GO_TOOLCHAIN_SHA256} (as pinned)" in output
    assert GO_TOOLCHAIN_H1 in output and f"unpacked into {folder}" in output
    assert f"Go toolchain: {GO_TOOLCHAIN_VERSION} at {go} (fetched" in output

    version = subprocess.run([str(go), "version"], env=dict(env, GOTOOLCHAIN="local"), capture_output=True,
                             text=True, timeout=60)
    assert version.stdout.startswith(f"go version {GO_TOOLCHAIN_VERSION} linux/amd64"), version
    assert sorted(p.name for p in (cache / "go").iterdir()) == [folder.name]  # no temp folder left
    marker = gt.read_marker(folder)
    assert marker is not None and marker["sha256"] == GO_TOOLCHAIN_SHA256 and marker["url"] == url
    on_disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())

    second, second_s = _go_step(env)
    again = second.stdout + second.stderr
    assert second.returncode == 0, again
    assert f"Go toolchain: {GO_TOOLCHAIN_VERSION} at {go}, fetched earlier from {url}" in again
    assert "MB to download" not in again
    print(f"\nGo toolchain fetch: {marker['size']:,} bytes downloaded, {on_disk:,} bytes unpacked, "
          f"first run {first_s:.1f}s, second run {second_s:.1f}s")
