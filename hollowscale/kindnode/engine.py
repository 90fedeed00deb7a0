"""The container engine kind nodes run in: Debian's podman, unpacked into hollowscale's cache.

Why podman, and why unpacked rather than installed:

- kind's docker provider always runs its nodes ``--privileged``, and Docker 20.10 (Debian's) then asks
  runc for *every* capability.  Where the harness itself lacks one (on this project's machines the
  bounding set has all but CAP_SYS_RESOURCE), runc fails with ``unable to apply caps: operation not
  permitted``.  Podman's privileged mode takes the caller's bounding set instead, and no daemon runs:
  nothing to start, nothing to stop.
- ``apt-get download`` + ``dpkg-deb -x`` into ``<cache>/kind/podman-<version>/`` changes nothing on the
  machine (no package installed, nothing in ``/etc``), needs no root for the download, and pins the
  version Debian ships.  The system's runc, conmon's libraries and the CNI plugins
  (``containernetworking-plugins``, installed by setup for real nodes) are used as they are.
- Podman runs with our own ``containers.conf``, ``storage.conf`` and ``registries.conf``
  (``CONTAINERS_CONF`` and friends), so its images, containers, volumes and networks live under our
  cache and never mix with a podman the user already has.  ``bin/podman`` is a wrapper that sets this
  environment, so kind (``KIND_EXPERIMENTAL_PROVIDER=podman``) finds it first on ``PATH``.
- Its network backend (Debian's netavark, with aardvark-dns so that kind's nodes find each other by
  name) leaves chains in the host's iptables; :mod:`hollowscale.kindnode.firewall` takes away those it
  added.

One setting is not a preference: podman asks runc for RLIMIT_NOFILE and RLIMIT_NPROC of 1048576 by
default, and raising a hard limit needs CAP_SYS_RESOURCE, so every container failed here with ``error
setting rlimits for ready process: ... operation not permitted``.  :func:`containers_conf` sets both to
no more than what the harness's own process holds (conmon, podman's monitor, ran with nproc 32768 on
these machines, so that is the ceiling for nproc).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hollowscale.paths import cache_root

#: Debian packages unpacked for podman: podman itself, its monitor, its default configuration, the two
#: libraries podman links that a machine without podman lacks (everything else it links is in the base), and
#: its network backend with DNS (kind's workers join ``<cluster>-control-plane:6443`` by name; the CNI
#: backend without the dnsname plugin cannot resolve it: "lookup hsprobe-control-plane ... no such host")
PODMAN_PACKAGES = ("podman", "conmon", "golang-github-containers-common", "libgpgme11", "libsubid4", "netavark",
                   "aardvark-dns")
#: the highest RLIMIT_NPROC a container may ask for here (what conmon runs with; see the module docstring)
NPROC_CEILING = 32768
RUNC = "/usr/sbin/runc"
ProgressFn = Callable[[str], None]


class EngineError(RuntimeError):
    """The engine could not be prepared or a podman command failed: the message says which and why."""


def hard_limits(limits_text: str) -> tuple[int, int]:
    """(nofile, nproc) hard limits from a ``/proc/<pid>/limits`` text (``unlimited`` as a large number)."""
    found: dict[str, int] = {}
    for line in limits_text.splitlines():
        for key, label in (("nofile", "Max open files"), ("nproc", "Max processes")):
            if line.startswith(label):
                hard = line[len(label):].split()[1]
                found[key] = 1 << 30 if hard == "unlimited" else int(hard)
    if set(found) != {"nofile", "nproc"}:
        raise EngineError("cannot read the open-files and processes limits from /proc/self/limits")
    return found["nofile"], found["nproc"]


def containers_conf(root: Path, nofile: int, nproc: int) -> str:
    """Podman's ``containers.conf`` for the engine under ``root``: our conmon, the system's runc, cgroupfs
    (no systemd here), events to a file, netavark networks (with aardvark-dns) defined under ``root``, and
    ulimits the harness can grant (module docstring)."""
    nproc = min(nproc, NPROC_CEILING)
    return "\n".join([
        "# Written by hollowscale.kindnode.engine: podman for kind nodes, private to hollowscale.",
        "[containers]",
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]',
        "",
        "[engine]",
        f'conmon_path = ["{root}/usr/bin/conmon"]',
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        f'events_logfile_path = "{root}/state/events.log"',
        f'tmp_dir = "{root}/state/tmp"',
        f'volume_path = "{root}/state/volumes"',
        f'helper_binaries_dir = ["{root}/usr/lib/podman"]',
        "",
        "[engine.runtimes]",
        f'runc = ["{RUNC}"]',
        "",
        "[network]",
        'network_backend = "netavark"',
        f'network_config_dir = "{root}/state/networks"',
        "",
    ])


def storage_conf(root: Path) -> str:
    """``storage.conf``: overlay storage under ``root`` (never the system's ``/var/lib/containers``)."""
    return "\n".join([
        "# Written by hollowscale.kindnode.engine.",
        "[storage]",
        'driver = "overlay"',
        f'graphroot = "{root}/state/storage"',
        f'runroot = "{root}/state/run"',
        "",
    ])


POLICY_JSON = '{"default": [{"type": "insecureAcceptAnything"}]}\n'


@dataclass(frozen=True)
class Podman:
    """The unpacked podman under ``root`` and the environment it runs with."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "usr" / "bin" / "podman"

    @property
    def bin_dir(self) -> Path:
        """Put first on ``PATH`` for kind: holds the ``podman`` wrapper."""
        return self.root / "bin"

    @property
    def networks_dir(self) -> Path:
        """Where this podman keeps its networks (``network_config_dir`` of :func:`containers_conf`)."""
        return self.root / "state" / "networks"

    def env(self) -> dict[str, str]:
        """What podman needs in its environment (added to the caller's)."""
        conf = self.root / "conf"
        return {"CONTAINERS_CONF": str(conf / "containers.conf"),
                "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf"),
                "CONTAINERS_REGISTRIES_CONF": str(conf / "registries.conf"),
                "LD_LIBRARY_PATH": str(self.root / "usr" / "lib" / "x86_64-linux-gnu"),
                # the image policy has no variable or config key of its own: podman reads it from
                # $HOME/.config/containers/policy.json before /etc/containers/policy.json
                "HOME": str(self.root / "home")}

    def kind_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's) for running kind with this podman."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        env["KIND_EXPERIMENTAL_PROVIDER"] = "podman"
        return env

    def run(self, args: Sequence[str], timeout_s: float = 300, check: bool = True,
            input_file: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``podman <args>`` through the wrapper; with ``check``, a failure raises naming the command."""
        stdin = input_file.open("rb") if input_file else subprocess.DEVNULL
        try:
            proc = subprocess.run([str(self.bin_dir / "podman"), *args], stdin=stdin, capture_output=True,
                                  timeout=timeout_s, check=False, text=True)
        finally:
            if input_file:
                stdin.close()  # type: ignore[union-attr]
        if check and proc.returncode != 0:
            why = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise EngineError(f"`podman {' '.join(args)}` failed (exit {proc.returncode}): "
                              f"{why[-1] if why else 'no output'}")
        return proc


def load_image(podman: Podman, name: str, digest: str, archive: Path) -> bool:
    """Load ``archive`` into ``podman`` unless ``name`` is there already with manifest ``digest`` (a rebuild
    keeps the name and changes the digest); True when it loaded.  The build it replaces, left without a
    name, is removed (~1 GB each) unless a container still uses it."""
    have = podman.run(["image", "inspect", "--format", "{{.Digest}} {{.Id}}", name], check=False)
    old = have.stdout.split() if have.returncode == 0 else []
    if old and old[0] == digest:
        return False
    podman.run(["load", "-i", str(archive)], timeout_s=900)
    if len(old) == 2:
        tags = podman.run(["image", "inspect", "--format", "{{len .RepoTags}}", old[1]], check=False).stdout.strip()
        if tags == "0":
            podman.run(["rmi", old[1]], check=False)  # refused while a container uses it: then it stays
    return True


def podman_root(root: Path | None = None) -> Path:
    """Where the unpacked podman lives (keyed by Debian's version of it once unpacked)."""
    return (root or cache_root()) / "kind" / "podman"


def _wrapper(podman: Podman) -> str:
    exports = "".join(f'export {k}="{v}"\n' for k, v in podman.env().items())
    return f'#!/bin/sh\n# Written by hollowscale.kindnode.engine: podman with its private configuration.\n' \
           f'{exports}exec "{podman.binary}" "$@"\n'


def _download(packages: Sequence[str], into: Path) -> list[Path]:
    try:
        proc = subprocess.run(["apt-get", "download", *packages], cwd=into, capture_output=True, text=True,
                              timeout=600, check=False)
    except FileNotFoundError:
        raise EngineError("apt-get not found: the kind engine is unpacked from Debian's podman packages, "
                          "which needs a Debian system") from None
    debs = sorted(into.glob("*.deb"))
    if proc.returncode != 0 or len(debs) != len(packages):
        why = [line for line in proc.stderr.splitlines() if line.startswith("E:")] or proc.stderr.splitlines()[-1:]
        raise EngineError(f"`apt-get download {' '.join(packages)}` failed: {why[-1] if why else proc.returncode}")
    return debs


def ensure_podman(progress: ProgressFn | None = None, root: Path | None = None) -> Podman:
    """Unpack Debian's podman into the cache once (seconds; a no-op when there), write its configuration,
    and check it runs.  Atomic: a half-unpacked engine is never left where the next call looks."""
    final = podman_root(root)
    podman = Podman(final)
    if not podman.binary.exists():
        if not os.path.exists(RUNC):
            raise EngineError(f"{RUNC} not found: install Debian's runc (`make setup` installs it)")
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".podman-", dir=final.parent))
        try:
            if progress:
                progress(f"unpacking Debian's {', '.join(PODMAN_PACKAGES)} into {final}")
            (work / "debs").mkdir()
            tree = work / "tree"
            for deb in _download(PODMAN_PACKAGES, work / "debs"):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True, capture_output=True, timeout=120)
            shutil.rmtree(work / "debs")
            tree.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    nofile, nproc = hard_limits(Path("/proc/self/limits").read_text())
    conf = final / "conf"
    conf.mkdir(exist_ok=True)
    for sub in ("state/tmp", "state/networks", "state/volumes"):
        (final / sub).mkdir(parents=True, exist_ok=True)
    (conf / "containers.conf").write_text(containers_conf(final, nofile, nproc))
    (conf / "storage.conf").write_text(storage_conf(final))
    (conf / "registries.conf").write_text("unqualified-search-registries = []\n")
    policy = final / "home" / ".config" / "containers" / "policy.json"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(POLICY_JSON)
    podman.bin_dir.mkdir(exist_ok=True)
    wrapper = podman.bin_dir / "podman"
    wrapper.write_text(_wrapper(podman))
    wrapper.chmod(0o755)
    version = podman.run(["version", "--format", "{{.Client.Version}}"], timeout_s=60).stdout.strip()
    if progress:
        progress(f"podman {version} ready at {wrapper}")
    return podman


__all__ = ["NPROC_CEILING", "PODMAN_PACKAGES", "EngineError", "Podman", "containers_conf", "ensure_podman",
           "hard_limits", "load_image", "podman_root", "storage_conf"]
