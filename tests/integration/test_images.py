"""The images hollowscale writes run in a real containerd (no Kubernetes needed here).

A private containerd (its own root, state and socket in a temporary directory, CRI plugin off) is
started for this module and stopped afterwards, with every container, task, image, snapshot and
mount it made removed; the teardown checks that no mount and no shim is left. Needs root,
``containerd``, ``ctr`` and ``runc`` (``make setup`` installs them for real nodes): without them
the tests fail and say so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hollowscale.images import BUSYBOX_IMAGE, DISTILL_IMAGE, PAUSE_IMAGE, BuiltImage, build_images, import_images
from hollowscale.images.build import ImageError
from hollowscale.images.importer import present_images

pytestmark = [pytest.mark.integration, pytest.mark.root]
NAMESPACE = "k8s.io"


@dataclass(frozen=True)
class Containerd:
    root: Path
    socket: Path
    ctr: str
    proc: subprocess.Popen[bytes]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.ctr, "--address", str(self.socket), "--namespace", NAMESPACE, *args],
                              capture_output=True, text=True, timeout=timeout)


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), reverse=True)


def _shims_of(socket: Path) -> list[int]:
    """PIDs of containerd shims serving our containerd (their command line names our socket)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and b"containerd-shim" in cmdline[0] and str(socket).encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def _require_tools() -> tuple[str, str]:
    if os.geteuid() != 0:
        pytest.fail("the image integration tests need root (containerd and runc create mounts and namespaces)",
                    pytrace=False)
    found = {tool: shutil.which(tool) for tool in ("containerd", "ctr", "runc")}
    missing = [tool for tool, path in found.items() if path is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not on PATH: install with `apt-get install -y containerd runc` "
                    "(make setup does for real nodes)", pytrace=False)
    return str(found["containerd"]), str(found["ctr"])


@pytest.fixture(scope="module")
def containerd() -> Iterator[Containerd]:
    binary, ctr = _require_tools()
    root = Path(tempfile.mkdtemp(prefix="hs-ctd-"))  # short: unix socket paths are limited to 108 bytes
    socket = root / "c.sock"
    (root / "config.toml").write_text("\n".join([
        "version = 2",
        f'root = "{root / "root"}"',
        f'state = "{root / "state"}"',
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "[grpc]", f'  address = "{socket}"',
        "[ttrpc]", f'  address = "{socket}.ttrpc"',
        "[debug]", f'  address = "{root / "debug.sock"}"',
        "",
    ]))
    with open(root / "containerd.log", "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen([binary, "--config", str(root / "config.toml")], stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    ctd = Containerd(root, socket, ctr, proc)
    try:
        deadline = time.monotonic() + 30
        while ctd.run("version", timeout=10).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"containerd did not start (exit {proc.poll()}):\n"
                            f"{(root / 'containerd.log').read_text()[-3000:]}", pytrace=False)
            time.sleep(0.2)
        yield ctd
    finally:
        _teardown(ctd)


def _teardown(ctd: Containerd) -> None:
    """Remove tasks, containers, images (and so snapshots), stop containerd, unmount, delete; then
    check that nothing of ours is left."""
    if ctd.proc.poll() is None:
        for task in ctd.run("tasks", "list", "-q", timeout=30).stdout.split():
            ctd.run("tasks", "kill", "-s", "SIGKILL", task, timeout=30)
            ctd.run("tasks", "delete", "-f", task, timeout=30)
        for container in ctd.run("containers", "list", "-q", timeout=30).stdout.split():
            ctd.run("containers", "delete", container, timeout=30)
        images = ctd.run("images", "list", "-q", timeout=30).stdout.split()
        if images:
            ctd.run("images", "remove", "--sync", *images, timeout=120)
        ctd.proc.send_signal(signal.SIGTERM)
        try:
            ctd.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            ctd.proc.kill()
            ctd.proc.wait(timeout=10)
    leftover_shims = _shims_of(ctd.socket)
    for pid in leftover_shims:
        os.kill(pid, signal.SIGKILL)
    leftover_mounts = _mounts_under(ctd.root)
    for point in leftover_mounts:
        subprocess.run(["umount", "-l", point], check=False)
    shutil.rmtree(ctd.root, ignore_errors=True)
    assert not leftover_shims, f"containerd shims left running: {leftover_shims}"
    assert not leftover_mounts, f"mounts left under {ctd.root}: {leftover_mounts}"
    assert not ctd.root.exists(), f"{ctd.root} could not be removed"


@pytest.fixture(scope="module")
def imported(containerd: Containerd) -> list[BuiltImage]:
    """pause, busybox and distill built (from the user's image cache: seconds when built before) and
    imported into the private containerd."""
    images = build_images(("pause", "busybox", "distill"))
    import_images(images, containerd.ctr, containerd.socket, NAMESPACE)
    return images


def test_import_lists_every_image_with_its_digest(containerd: Containerd, imported: list[BuiltImage]) -> None:
    present = present_images(containerd.ctr, containerd.socket, NAMESPACE)
    assert [i.name for i in imported] == [PAUSE_IMAGE, BUSYBOX_IMAGE, DISTILL_IMAGE]
    for image in imported:
        assert present.get(image.name) == image.digest, (image.name, present)


def test_import_again_is_a_quick_no_op(containerd: Containerd, imported: list[BuiltImage]) -> None:
    started = time.monotonic()
    import_images(imported, containerd.ctr, containerd.socket, NAMESPACE)
    assert time.monotonic() - started < 10, "a second import of unchanged images should skip them"


def test_import_of_a_missing_archive_fails_clearly(containerd: Containerd, imported: list[BuiltImage],
                                                   tmp_path: Path) -> None:
    ghost = BuiltImage(name="hollowscale.local/ghost:1", archive=tmp_path / "ghost.tar", digest="sha256:" + "0" * 64)
    with pytest.raises(ImageError, match=r"ghost\.tar for hollowscale\.local/ghost:1 is missing"):
        import_images([ghost], containerd.ctr, containerd.socket, NAMESPACE)


def test_busybox_runs_a_shell(containerd: Containerd, imported: list[BuiltImage]) -> None:
    out = containerd.run("run", "--rm", BUSYBOX_IMAGE, "hs-busybox", "sh", "-c", "echo hello from $(basename $0); id -u",
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hello", "from", "sh", "0"]


def test_pause_sleeps_until_sigterm_and_exits_zero(containerd: Containerd, imported: list[BuiltImage]) -> None:
    assert containerd.run("run", "-d", PAUSE_IMAGE, "hs-pause", timeout=60).returncode == 0
    try:
        time.sleep(1)
        tasks = containerd.run("tasks", "list").stdout
        assert "hs-pause" in tasks and "RUNNING" in tasks, tasks
        assert containerd.run("tasks", "kill", "-s", "SIGTERM", "hs-pause").returncode == 0
        deadline = time.monotonic() + 10
        while "STOPPED" not in containerd.run("tasks", "list").stdout:
            assert time.monotonic() < deadline, "pause did not stop on SIGTERM"
            time.sleep(0.2)
        deleted = containerd.run("tasks", "delete", "hs-pause")
        assert "exit status 0" in deleted.stdout + deleted.stderr or deleted.returncode == 0
    finally:
        containerd.run("tasks", "delete", "-f", "hs-pause")
        containerd.run("containers", "delete", "hs-pause")


def test_distill_image_imports_torch_and_trains_a_student(containerd: Containerd,
                                                          imported: list[BuiltImage]) -> None:
    check = containerd.run(
        "run", "--rm", DISTILL_IMAGE, "hs-distill-import", "python", "-c",
        "import json, distill, torch, numpy, distill.teacher, distill.student;"
        "from distill.data import load_fashion_mnist; ds = load_fashion_mnist();"
        "print(json.dumps({'torch': torch.__version__, 'train': len(ds.train_y), 'test': len(ds.test_y)}))",
        timeout=300,
    )
    assert check.returncode == 0, check.stderr[-3000:]
    facts = json.loads(check.stdout.strip().splitlines()[-1])
    assert (facts["train"], facts["test"]) == (60000, 10000)
    run = containerd.run(
        "run", "--rm", DISTILL_IMAGE, "hs-distill-student", "python", "-m", "distill.student", "--mode", "pure",
        "--epochs", "1", "--unlabelled", "2000", "--test-images", "1000", "--threads", "1", timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["mode"] == "pure" and result["lost_samples"] == 0
    assert result["test_accuracy"] > 0.3, result  # ten classes: chance is 0.1; one short epoch reaches ~0.6
