"""The two small images every real node needs: the pod sandbox (pause) and busybox for tests.

busybox comes from Debian's ``busybox-static`` (one static binary, ``/bin/busybox``) with a symlink
per applet (``sh``, ``sleep``, ``httpd``, ``nc``, ``wget`` ...), so test pods get a shell and the
usual tools without a registry.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hollowscale.images import pause
from hollowscale.images.layout import Entry, LayoutError, file_entry
from hollowscale.images.recipe import LayerRecipe, Recipe, files_layer

REGISTRY = "hollowscale.local"
PAUSE_IMAGE = f"{REGISTRY}/pause:{pause.PAUSE_VERSION}"
BUSYBOX_VERSION = "1.35"
BUSYBOX_IMAGE = f"{REGISTRY}/busybox:{BUSYBOX_VERSION}"
BUSYBOX_BINARY = Path("/bin/busybox")
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Enough of /etc for tools that look up users (ls -l, id, httpd) and for `hostname -f`.
ETC_FILES = {
    "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    "etc/group": b"root:x:0:\nnogroup:x:65534:\n",
    "etc/nsswitch.conf": b"passwd: files\ngroup: files\nhosts: files dns\n",
}


def base_entries() -> list[Entry]:
    """The directories and /etc files a Linux userland expects (tmp is world-writable, sticky)."""
    return [
        Entry("tmp", "dir", 0o1777),
        Entry("root", "dir", 0o700),
        Entry("proc", "dir", 0o555),
        Entry("sys", "dir", 0o555),
        Entry("dev", "dir", 0o755),
        Entry("etc", "dir", 0o755),
        *(Entry(path, "file", 0o644, data=data) for path, data in ETC_FILES.items()),
    ]


def pause_recipe() -> Recipe:
    def entries(workdir: Path) -> list[Entry]:
        binary = pause.compile_pause(workdir)
        return [Entry("pause", "file", 0o755, data=binary.read_bytes())]

    layer = LayerRecipe("pause program (gcc -static)", pause.fingerprint, entries)
    return Recipe("pause", PAUSE_IMAGE, [layer], {"Entrypoint": ["/pause"], "Env": [PATH_ENV]})


def busybox_applets(binary: Path = BUSYBOX_BINARY) -> list[str]:
    """The applets' install paths (``bin/sh``, ``usr/bin/wget`` ...), from the binary itself."""
    if not binary.is_file():
        raise LayoutError(f"{binary} not found: install Debian's busybox-static (`apt-get install -y busybox-static`)")
    proc = subprocess.run([str(binary), "--list-full"], capture_output=True, text=True)
    applets = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or "bin/sh" not in applets:
        raise LayoutError(f"`{binary} --list-full` did not list bin/sh (exit {proc.returncode}); "
                          "is it the static busybox (busybox-static)?")
    return applets


def busybox_recipe(binary: Path = BUSYBOX_BINARY) -> Recipe:
    def plan() -> list[Entry]:
        applets = [a for a in busybox_applets(binary) if a != "bin/busybox"]
        return [
            *base_entries(),
            file_entry("bin/busybox", binary, 0o755),
            *(Entry(applet, "symlink", 0o777, target="/bin/busybox") for applet in applets),
        ]

    layer = files_layer("busybox (Debian busybox-static)", plan)
    return Recipe("busybox", BUSYBOX_IMAGE, [layer], {"Cmd": ["sh"], "Env": [PATH_ENV]})
