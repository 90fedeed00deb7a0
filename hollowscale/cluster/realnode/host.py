"""What real nodes change on the machine itself, and how each change is undone.

Two kinds of change:

* **The cluster's bridge** (``hsbr-<hash of the cluster dir>``) with the pod network's gateway address:
  created by :func:`create_bridge`, deleted by :func:`delete_bridge`.  The /16 is picked so that it
  overlaps no route or address of the machine and no other running hollowscale cluster's.
* **Shared host state** that the kubelet touches whatever its flags say, and that several clusters
  (several helpers, several test sessions) may use at once:

  - ``/var/lib/kubelet/device-plugins/`` (the device manager's socket and checkpoint dir is hard-coded;
    every kubelet on the machine listens on the same ``kubelet.sock`` there and removes the sockets in
    it at start), ``/var/log/containers`` (legacy log symlinks, hard-coded), ``/run/containerd/s``
    (containerd 1.6 puts every shim's socket there, whatever its state dir), ``/var/lib/cni`` (libcni's
    result cache, not configurable through containerd 1.6's CRI plugin) and the ``k8s.io`` cgroups
    (runc's default cgroup parent when the kubelet runs without QoS cgroups);
  - the sysctls the kubelet sets at start (``vm.overcommit_memory``, ``kernel.panic``,
    ``kernel.panic_on_oops``, ...: ``protectKernelDefaults: true`` would make it refuse to start
    instead) and ``net.ipv4.ip_forward``.

  A claim file (``/run/hollowscale/realnodes.json``, under an flock) records which of those paths did not
  exist and the sysctl values before the first cluster claimed them, and which clusters use them now;
  when the last one releases (at ``down``), paths it created are removed and the sysctls restored.
  A claimant whose cluster dir is gone (a crashed session) is dropped from the list.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hollowscale.cluster.realnode.layout import pick_pod_cidr

CLAIM_DIR = Path("/run/hollowscale")
CLAIM_FILE = CLAIM_DIR / "realnodes.json"
#: host paths the kubelet or containerd create that no flag moves
SHARED_PATHS = (Path("/var/lib/kubelet"), Path("/var/log/containers"), Path("/run/containerd"), Path("/var/lib/cni"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: sysctls the kubelet sets at start (setupKernelTunables) plus the one a CNI gateway would set
SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
           "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward")


class HostError(RuntimeError):
    """A host change (bridge, claim) failed; the message names the command and its output."""


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip ARGS``; its stdout (raise HostError with stderr when ``check`` and it fails)."""
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise HostError(f"`ip {' '.join(args)}` failed: {out.stderr.strip()}")
    return out.stdout


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def bridge_ports(bridge: str) -> list[str]:
    """Interfaces enslaved to ``bridge`` (the host ends of pod veths)."""
    brif = Path("/sys/class/net", bridge, "brif")
    return sorted(p.name for p in brif.iterdir()) if brif.is_dir() else []


def machine_networks() -> list[str]:
    """Every IPv4 route destination and interface address of the machine (what a pod /16 must avoid)."""
    nets: list[str] = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(parts[parts.index("inet") + 1])
    for line in ip("-4", "route", "show", "table", "all").splitlines():
        dst = line.split()[0] if line.split() else ""
        if dst and dst[0].isdigit():
            nets.append(dst if "/" in dst else f"{dst}/32")
        elif dst in ("local", "broadcast") and len(line.split()) > 1:
            nets.append(line.split()[1] if "/" in line.split()[1] else f"{line.split()[1]}/32")
    return nets


def create_bridge(name: str, cidr: str, gateway: str) -> None:
    """The cluster's bridge, up, with the gateway address (the host side: node IP of every kubelet)."""
    prefix = cidr.split("/")[1]
    if not link_exists(name):
        ip("link", "add", "name", name, "type", "bridge")
    current = ip("-4", "-o", "addr", "show", "dev", name)
    if f"{gateway}/{prefix}" not in current:
        ip("addr", "add", f"{gateway}/{prefix}", "dev", name)
    ip("link", "set", name, "up")


def delete_bridge(name: str) -> list[str]:
    """Delete the bridge and any veth still attached to it; returns what was deleted."""
    gone: list[str] = []
    if not link_exists(name):
        return gone
    for port in bridge_ports(name):
        if ip("link", "del", port, check=False) == "" and not link_exists(port):
            gone.append(port)
    ip("link", "del", name, check=False)
    if not link_exists(name):
        gone.append(name)
    return gone


# ------------------------------------------------------------------------------------------ claims
@contextlib.contextmanager
def _locked() -> Iterator[dict[str, Any]]:
    """The claim document under an exclusive lock; written back when the block ends."""
    CLAIM_DIR.mkdir(parents=True, exist_ok=True)
    with open(CLAIM_DIR / "realnodes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            doc: dict[str, Any] = json.loads(CLAIM_FILE.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            doc = {}
        doc.setdefault("users", {})
        doc.setdefault("created", [])
        doc.setdefault("sysctls", {})
        yield doc
        if doc["users"] or doc["created"] or doc["sysctls"]:
            tmp = CLAIM_FILE.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc, indent=2))
            tmp.replace(CLAIM_FILE)
        else:
            CLAIM_FILE.unlink(missing_ok=True)


def _prune(doc: dict[str, Any]) -> None:
    """Drop claimants whose cluster dir no longer exists (their session crashed before ``down``)."""
    for user in list(doc["users"]):
        if not Path(user).exists():
            del doc["users"][user]


def _cgroup_dirs() -> list[Path]:
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(p / "k8s.io" for p in CGROUP_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


def _read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", name).read_text().strip()
    except OSError:
        return None


def claim(cluster_dir: Path, bridge: str) -> str:
    """Register ``cluster_dir`` as a user of the shared host state; returns its pod /16 (kept if claimed).

    The first claimant records what the machine looked like (absent paths, sysctl values).
    """
    key = str(Path(cluster_dir).absolute())
    with _locked() as doc:
        _prune(doc)
        if key in doc["users"]:
            return str(doc["users"][key]["cidr"])
        if not doc["users"] and not doc["sysctls"]:
            doc["created"] = [str(p) for p in (*SHARED_PATHS, *_cgroup_dirs()) if not p.exists()]
            doc["sysctls"] = {s: v for s in SYSCTLS if (v := _read_sysctl(s)) is not None}
        used = machine_networks() + [u["cidr"] for u in doc["users"].values()]
        cidr = pick_pod_cidr(used)
        doc["users"][key] = {"cidr": cidr, "bridge": bridge, "pid": os.getpid()}
        return cidr


def release(cluster_dir: Path) -> list[str]:
    """Drop ``cluster_dir``'s claim; when no cluster is left, undo the shared changes (returns what)."""
    key = str(Path(cluster_dir).absolute())
    undone: list[str] = []
    if not CLAIM_FILE.exists():
        return undone
    with _locked() as doc:
        doc["users"].pop(key, None)
        _prune(doc)
        if doc["users"]:
            return undone
        for name, value in doc["sysctls"].items():
            if _read_sysctl(name) != value:
                with contextlib.suppress(OSError):
                    Path("/proc/sys", name).write_text(value)
                    undone.append(f"sysctl {name.replace('/', '.')}={value}")
        for raw in doc["created"]:
            path = Path(raw)
            if str(path).startswith(str(CGROUP_ROOT)):
                with contextlib.suppress(OSError):
                    path.rmdir()  # only an empty cgroup can be removed: one in use stays
                    undone.append(f"removed {path}")
            elif path.exists():
                shutil.rmtree(path, ignore_errors=True)
                undone.append(f"removed {path}")
        doc["created"], doc["sysctls"] = [], {}
    with contextlib.suppress(OSError):
        (CLAIM_DIR / "realnodes.lock").unlink()
        CLAIM_DIR.rmdir()
    return undone


def claimants() -> dict[str, Any]:
    """The clusters that hold a claim now (cluster dir -> cidr, bridge, pid)."""
    try:
        return dict(json.loads(CLAIM_FILE.read_text()).get("users") or {})
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
