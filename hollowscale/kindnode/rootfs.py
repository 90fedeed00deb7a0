"""The kind node's Debian root filesystem: what kind's ``kindest/base`` image holds, built here with debootstrap.

kind builds its base image FROM a Debian image in a registry, which is out of reach here; the same
Debian packages come from the Debian archive, which is not.  ``debootstrap --variant=minbase`` with the
package list of kind's ``images/base/Dockerfile`` (as far as Debian has them: containerd, runc and the
CNI plugins are Debian's own builds, not kind's) gives the tree; then the same clean-up kind's Dockerfile
does (systemd units a container must not start, journald without the kernel log, ``/sbin/init``).

The layer's fingerprint is what decides its content on our side (the package list, the suite, the
clean-up's version), so the tree is built once and cached like any image layer; a new Debian point
release is picked up when the list or :data:`ROOTFS_REVISION` changes.

debootstrap itself is Debian's, unpacked from its .deb into the cache when the machine has none
installed (the same way as :mod:`hollowscale.kindnode.engine`): nothing is installed on the machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from hollowscale.images.layout import Entry, LayoutError
from hollowscale.images.recipe import LayerRecipe
from hollowscale.paths import cache_root

SUITE = "bookworm"
MIRROR_ENV = "HOLLOWSCALE_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: kind's images/base/Dockerfile package list (nfs-common and open-iscsi left out: they serve only storage
#: tests), plus what its kind-owned binaries are here (Debian's containerd, runc and CNI plugins) and
#: what our own node scripts use (kmod for modprobe, socat for port-forward)
NODE_PACKAGES = (
    "systemd", "systemd-sysv", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount",
    "kmod", "libseccomp2", "pigz", "e2fsprogs", "bash", "ca-certificates", "curl", "jq", "procps", "socat",
    "containerd", "runc", "containernetworking-plugins",
)
#: bumped when the clean-up below changes, so a cached tree is not reused
ROOTFS_REVISION = "1"
#: parts of the tree that never go into the image: the runtime fills them, or they are caches
SKIPPED_PREFIXES = ("dev/", "proc/", "sys/", "run/", "tmp/", "var/cache/apt/", "var/lib/apt/lists/",
                    "usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "var/log/")
ProgressFn = Callable[[str], None]


class RootfsError(RuntimeError):
    """debootstrap could not be had or failed: the message has its last lines."""


def mirror() -> str:
    """The Debian mirror debootstrap reads (``$HOLLOWSCALE_DEBIAN_MIRROR``, else Debian's CDN)."""
    return os.environ.get(MIRROR_ENV, DEFAULT_MIRROR)


def rootfs_fingerprint(packages: tuple[str, ...] = NODE_PACKAGES) -> str:
    """What the tree depends on, as far as we decide it."""
    key = "\0".join([ROOTFS_REVISION, SUITE, mirror(), *sorted(packages)])
    return hashlib.sha256(key.encode()).hexdigest()


def debootstrap_command(root: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv prefix, extra environment) of a debootstrap: the machine's, or Debian's unpacked into the cache."""
    installed = shutil.which("debootstrap")
    if installed:
        return [installed], {}
    home = (root or cache_root()) / "kind" / "debootstrap"
    script = home / "usr" / "sbin" / "debootstrap"
    if not script.exists():
        home.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".debootstrap-", dir=home.parent))
        try:
            proc = subprocess.run(["apt-get", "download", "debootstrap"], cwd=work, capture_output=True, text=True,
                                  timeout=300, check=False)
            debs = list(work.glob("debootstrap_*.deb"))
            if proc.returncode != 0 or not debs:
                raise RootfsError(f"`apt-get download debootstrap` failed: {proc.stderr.strip()[-300:]}")
            subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(work / "tree")], check=True, capture_output=True)
            (work / "tree").rename(home)
        except FileNotFoundError as exc:
            raise RootfsError(f"{exc.filename} not found: the kind node's root filesystem is built with Debian's "
                              "debootstrap, which needs a Debian system") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return [str(script)], {"DEBOOTSTRAP_DIR": str(home / "usr" / "share" / "debootstrap")}


def bootstrap(target: Path, packages: tuple[str, ...] = NODE_PACKAGES, progress: ProgressFn | None = None,
              timeout_s: float = 1800) -> None:
    """``debootstrap --variant=minbase --include=<packages> <suite> <target>`` (root needed: it chroots and
    runs maintainer scripts), then kind's clean-up (:func:`clean_up`)."""
    argv, env = debootstrap_command()
    cmd = [*argv, "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(target), mirror()]
    if progress:
        progress(f"debootstrap {SUITE} with {len(packages)} packages into {target} (a few minutes)")
    log = target.parent / "debootstrap.log"
    with log.open("w") as out:
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise RootfsError(f"debootstrap took more than {timeout_s:.0f} s (log: {log})") from None
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise RootfsError(f"debootstrap failed (exit {proc.returncode}): {' / '.join(tail)}")
    clean_up(target)


def clean_up(root: Path) -> None:
    """What kind's ``images/base/Dockerfile`` does to its Debian tree so that systemd runs as a container's
    init: no udev, tmpfiles set-up or targets' default wants; journald without /dev/kmsg; /sbin/init;
    binfmt masked; an empty machine-id (the entrypoint makes one per node)."""
    lib = root / "lib" / "systemd" / "system"
    (lib / "sysinit.target.wants" / "systemd-tmpfiles-setup.service").unlink(missing_ok=True)
    for wants in ("multi-user.target.wants", "local-fs.target.wants", "basic.target.wants"):
        for link in (lib / wants).glob("*"):
            link.unlink()
    for link in (lib / "sockets.target.wants").glob("*"):
        if "udev" in link.name or "initctl" in link.name:
            link.unlink()
    for link in (root / "etc" / "systemd" / "system").glob("*.wants/*"):
        link.unlink()
    journald = root / "etc" / "systemd" / "journald.conf"
    if journald.exists():
        journald.write_text(journald.read_text() + "\nReadKMsg=no\n")
    init = root / "sbin" / "init"
    if init.is_symlink() or init.exists():
        init.unlink()
    init.symlink_to("/usr/lib/systemd/systemd")
    binfmt = root / "etc" / "systemd" / "system" / "systemd-binfmt.service"
    binfmt.unlink(missing_ok=True)
    binfmt.symlink_to("/dev/null")
    (root / "etc" / "machine-id").write_text("")
    (root / "var" / "lib" / "dbus" / "machine-id").unlink(missing_ok=True)


def tree_entries(root: Path, skipped: tuple[str, ...] = SKIPPED_PREFIXES) -> list[Entry]:
    """Every directory, regular file and symlink under ``root`` as layer entries, modes kept (setuid and
    sticky bits too); a hard link becomes a copy; devices, sockets and fifos are left out (the runtime
    makes /dev).  The folders ``skipped`` names stay, empty."""
    entries: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in sorted(dirnames) + sorted(filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if any(rel.startswith(p) for p in skipped):
                continue
            st = path.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                entries.append(Entry(rel, "symlink", 0o777, target=os.readlink(path)))
            elif stat.S_ISDIR(st.st_mode):
                entries.append(Entry(rel, "dir", mode))
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, "file", mode, source=path))
        # do not descend into symlinked directories (os.walk does not by default) nor into skipped ones
        dirnames[:] = [d for d in dirnames
                       if not any((here / d).relative_to(root).as_posix().startswith(p) for p in skipped)]
    if not any(e.path == "usr/lib/systemd/systemd" for e in entries):
        raise LayoutError(f"{root} has no usr/lib/systemd/systemd: not a node root filesystem")
    return entries


def rootfs_layer(packages: tuple[str, ...] = NODE_PACKAGES, progress: ProgressFn | None = None) -> LayerRecipe:
    """The root filesystem as an image layer: fingerprinted by :func:`rootfs_fingerprint`, built (debootstrap
    and clean-up into the build's work folder) only when the cache lacks it."""

    def entries(workdir: Path) -> list[Entry]:
        target = workdir / "rootfs"
        bootstrap(target, packages, progress)
        return tree_entries(target)

    return LayerRecipe(f"Debian {SUITE} root filesystem ({len(packages)} packages, debootstrap)",
                       lambda: rootfs_fingerprint(packages), entries, compress=False)


__all__ = ["NODE_PACKAGES", "SUITE", "RootfsError", "bootstrap", "clean_up", "debootstrap_command", "mirror",
           "rootfs_fingerprint", "rootfs_layer", "tree_entries"]
