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

Only what we changed is undone.  A created path that something else uses by then (a socket a live
process listens on, a mount point, a link to anywhere but a claimant's real nodes: another kubelet or
containerd started meanwhile) is left whole and reported.  A sysctl is set back only while it still holds
the value the kubelet sets (:data:`KUBELET_SYSCTLS`): one that someone changed after us is theirs.
``/run/hollowscale`` itself goes only when the first claim created it.
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

from hollowscale.cluster.clusterdir import mount_points
from hollowscale.cluster.realnode.layout import pick_pod_cidr

CLAIM_DIR = Path("/run/hollowscale")
CLAIM_FILE = CLAIM_DIR / "realnodes.json"
#: host paths the kubelet or containerd create that no flag moves
SHARED_PATHS = (Path("/var/lib/kubelet"), Path("/var/log/containers"), Path("/run/containerd"), Path("/var/lib/cni"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: sysctls the kubelet sets at start (setupKernelTunables) plus the one a CNI gateway would set
SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
           "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward")
#: the values the kubelet (setupKernelTunables) and a CNI gateway set: only a sysctl still at its value is ours
KUBELET_SYSCTLS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                   "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
                   "kernel/keys/root_maxbytes": "25000000", "net/ipv4/ip_forward": "1"}
SYSCTL_ROOT = Path("/proc/sys")
#: unix sockets bound on this machine (a created path holding one that is live is someone else's now)
UNIX_SOCKETS = Path("/proc/net/unix")


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
    made_dir = not CLAIM_DIR.exists()
    CLAIM_DIR.mkdir(parents=True, exist_ok=True)
    with open(CLAIM_DIR / "realnodes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            doc: dict[str, Any] = json.loads(CLAIM_FILE.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            doc = {}
        doc.setdefault("claim_dir_created", made_dir)
        doc.setdefault("claimed_by", [])
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
        return (SYSCTL_ROOT / name).read_text().strip()
    except OSError:
        return None


def sysctls_to_restore(before: dict[str, str], now: dict[str, str | None]) -> dict[str, str]:
    """The sysctls to set back (name -> value before the first claim): those that changed since and still
    hold the kubelet's value; one that someone else set to another value meanwhile is left as it is."""
    return {name: value for name, value in before.items()
            if now.get(name) not in (None, value) and now.get(name) == KUBELET_SYSCTLS.get(name)}


def bound_sockets() -> set[str]:
    """Paths of the unix sockets some process has bound now (``/proc/net/unix``)."""
    try:
        lines = UNIX_SOCKETS.read_text().splitlines()[1:]
    except OSError:
        return set()
    return {parts[7] for line in lines if len(parts := line.split()) > 7 and parts[7].startswith("/")}


def foreign_in(path: Path, live_sockets: set[str], ours: list[str], mounts: set[str]) -> list[str]:
    """What under ``path`` (a path the first claim created) is not ours: a socket a process listens on, a
    mount point, a link to anywhere but the ``ours`` dirs (the claimants' real nodes)."""
    found: list[str] = []
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = Path(root, name)
            if str(entry) in mounts:
                found.append(f"{entry} (a mount point)")
            elif str(entry) in live_sockets:
                found.append(f"{entry} (a socket a running process listens on)")
            elif entry.is_symlink() and not any(
                    os.path.normpath(os.readlink(entry)).startswith(o.rstrip("/") + "/") for o in ours):
                found.append(f"{entry} (a link to {os.readlink(entry)})")
    return found


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
        for user in doc["users"]:  # whose links in a created path are ours at release (a claim file of an
            if user not in doc["claimed_by"]:  # older hollowscale's has users but no claimed_by)
                doc["claimed_by"].append(user)
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
        now = {name: _read_sysctl(name) for name in doc["sysctls"]}
        restore = sysctls_to_restore(doc["sysctls"], now)
        for name, value in restore.items():
            with contextlib.suppress(OSError):
                (SYSCTL_ROOT / name).write_text(value)
                undone.append(f"sysctl {name.replace('/', '.')}={value}")
        for name, value in doc["sysctls"].items():
            if name not in restore and now.get(name) not in (None, value):
                undone.append(f"left sysctl {name.replace('/', '.')}={now[name]} (changed by someone else; "
                              f"it was {value})")
        live = bound_sockets()
        ours = [str(Path(d) / "real") for d in doc["claimed_by"]]
        for raw in doc["created"]:
            path = Path(raw)
            if str(path).startswith(str(CGROUP_ROOT)):
                with contextlib.suppress(OSError):
                    path.rmdir()  # only an empty cgroup can be removed: one in use stays
                    undone.append(f"removed {path}")
            elif path.exists():
                foreign = foreign_in(path, live, ours, mount_points())
                if foreign:
                    undone.append(f"left {path}: in use by something else ({'; '.join(foreign[:3])})")
                else:
                    shutil.rmtree(path, ignore_errors=True)
                    undone.append(f"removed {path}")
        doc["created"], doc["sysctls"], doc["claimed_by"] = [], {}, []
        made_dir = doc["claim_dir_created"] is True
    with contextlib.suppress(OSError):
        (CLAIM_DIR / "realnodes.lock").unlink()
        if made_dir:  # a /run/hollowscale that was there before the first claim stays
            CLAIM_DIR.rmdir()
    return undone


def claimants() -> dict[str, Any]:
    """The clusters that hold a claim now (cluster dir -> cidr, bridge, pid)."""
    try:
        return dict(json.loads(CLAIM_FILE.read_text()).get("users") or {})
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
