"""What podman's network backend (netavark) leaves in ``/run/containers``, and how the harness takes back
exactly what its own podman made there.

Rootful podman keeps its network run state in ``/run/containers/networks`` whatever its configuration
says (podman 4.3 hard-codes the path for root), a folder every rootful podman on the machine shares: the
IP allocations (``ipam.db``, podman's), netavark's lock for aardvark-dns (``aardvark.lock``) and, per
network with DNS, the config of its DNS server, aardvark-dns (``aardvark-dns/<network>``: a first line with
the addresses it listens on, the network's gateways, then one line per container; beside them the server's
pid file).  netavark rewrites that config as containers come and go and removes it with the network's last
container.

Why this module: a container that went without netavark's teardown (a killed engine, an interrupted
run) leaves its line, so the file outlives the network.  kind names its network ``kind`` every time;
the next ``kind`` network gets a new subnet, netavark appends the new containers to the old file, and
aardvark-dns goes on listening on the old gateway only: the nodes' DNS queries to the new gateway go
unanswered, they fall back to the machine's resolver, and a worker cannot resolve the control plane
(``kubeadm join``: ``lookup <cluster>-control-plane ... no such host``).

The folder is shared, so nothing in it is removed for what it looks like (a config of a network no podman
seems to have may be that of a podman with a config folder we do not know).  Instead :class:`Ledger`, a
file in our podman's own state folder, names before ``kind create`` starts (so that a run killed during the
creation still leaves it) the exact DNS config path each of our networks will use, whether it was there
then and the time, and whether ``/run/containers`` was there.  :func:`clear_own_stale_dns` removes a config
only when the ledger names its path, it appeared after the ledger's time, and neither our podman nor the
machine's has a network of that name now; :func:`note_before_create` refuses to start when a config of that
name is there that the ledger does not name and would break the cluster (:class:`ForeignDnsConfigError`:
the user decides); :func:`remove_run_dir` takes away ``/run/containers`` when a run of ours made it, path by
path (only the files our podman's netavark makes, then the folders if empty), and leaves it whole when
anything else is in it.

The same interrupted teardown leaves the network's bridge, the nodes' veths on it and their network
namespaces (``/run/netns``): :func:`remove_leaked_bridge` takes them away, given the bridge of a network
of ours that is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

#: rootful podman's run state (made by it where missing)
RUN_DIR = Path("/run/containers")
PID_FILE = "aardvark.pid"
#: where the machine's own rootful podman keeps its networks (each ``<name>.json``)
SYSTEM_NETWORKS = Path("/etc/containers/networks")
#: the ledger's name, in our podman's state folder (beside its network config folder, never in it: podman
#: reads every ``*.json`` there as a network)
LEDGER_NAME = "netavark-ledger.json"
#: what rootful podman and its netavark make under ``/run/containers`` for networks (podman 4.3, netavark 1.4),
#: relative to it, besides the DNS configs themselves: the only paths :func:`remove_run_dir` ever removes
RUN_FILES = ("networks/ipam.db", "networks/aardvark.lock", f"networks/aardvark-dns/{PID_FILE}")
RUN_FOLDERS = ("networks/aardvark-dns", "networks", "")  # deepest first; "" is the run folder itself
#: how much earlier than the ledger's time a config's ctime may read and still be one made after it (the
#: kernel's file timestamps are coarser than ``time.time()``)
CLOCK_SLACK_S = 1.0


class ForeignDnsConfigError(RuntimeError):
    """A DNS config that is not ours is in the way of the cluster's network: the message names the file and why."""


def dns_configs(folder: Path) -> list[Path]:
    """The network configs aardvark-dns serves from ``folder`` (its pid file apart), [] without one."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != PID_FILE) if folder.is_dir() else []


def dns_dir(run_dir: Path = RUN_DIR) -> Path:
    """aardvark-dns's config folder under ``run_dir``."""
    return run_dir / "networks" / "aardvark-dns"


def ledger_path(own_networks: Path) -> Path:
    """The ledger of the podman whose network config folder is ``own_networks``: in its state folder."""
    return own_networks.parent / LEDGER_NAME


def _has_network(name: str, network_dirs: Iterable[Path]) -> Path | None:
    return next((d / f"{name}.json" for d in network_dirs if (d / f"{name}.json").exists()), None)


@dataclass
class Ledger:
    """What our podman's networks may make in the shared run state, written before they exist.

    ``configs``: exact DNS config path -> ``{"network", "existed", "time"}`` (``existed``: the file was there
    when noted, which happens only for a network our podman already had, e.g. a kept cluster's).
    ``run_dirs``: run folder -> ``{"existed", "time"}``.
    """

    path: Path
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_dirs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """The ledger at ``path``; an empty one when there is none (an unreadable one is an error: it is the
        only record of what we may remove)."""
        if not path.exists():
            return cls(path)
        doc = json.loads(path.read_text())
        return cls(path, dict(doc.get("configs") or {}), dict(doc.get("run_dirs") or {}))

    def save(self) -> None:
        """Write it whole (a temporary file of its own beside it, then renamed over it); none when empty."""
        if not self.configs and not self.run_dirs:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"configs": self.configs, "run_dirs": self.run_dirs}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def made_run_dir(self, run_dir: Path) -> bool:
        """Whether a run of ours noted ``run_dir`` as absent before its cluster (so it, or a killed one, made it)."""
        entry = self.run_dirs.get(str(run_dir))
        return entry is not None and not entry["existed"]

    def networks(self) -> set[str]:
        return {e["network"] for e in self.configs.values()}


def note_before_create(ledger: Ledger, own_networks: Path, run_dir: Path, networks: Iterable[str],
                       system_networks: Path | None = None) -> None:
    """Write into ``ledger`` (and save it) the DNS config path each of ``networks`` will use under ``run_dir``,
    whether it is there now, and whether ``run_dir`` is; an entry an earlier run left stays (its time is the
    earlier one).  Call it after :func:`clear_own_stale_dns` and before the networks are made.

    Raises:
        ForeignDnsConfigError: a config of one of ``networks`` is there that the ledger does not name while
            our podman has no such network: netavark would append our containers to it (module docstring).
            It is not ours to remove.
    """
    now = time.time()
    folder = dns_dir(run_dir)
    for name in networks:
        path = folder / name
        if str(path) in ledger.configs:
            continue
        if path.exists() and _has_network(name, (own_networks,)) is None:
            theirs = _has_network(name, (system_networks or SYSTEM_NETWORKS,))
            first = (path.read_text(errors="replace").splitlines() if path.is_file() else [])[:1] or ["(empty)"]
            raise ForeignDnsConfigError(
                f"{path}: a DNS config for a network named {name} that hollowscale's podman neither has nor made "
                f"(its ledger {ledger.path} does not name it)"
                + (f"; the machine's podman has a network of that name ({theirs})" if theirs else "")
                + f". kind's network is always named {name}: netavark would add the new cluster's nodes to this "
                f"file, aardvark-dns would go on listening only on the gateways in its first line ({first[0]}), and "
                "the workers could not resolve the control plane (kubeadm join: lookup ...-control-plane: no such "
                "host). Remove it yourself if no podman of yours uses a network of that name, then run again")
        # else absent, or our podman has that network (a cluster kept from an earlier run) and it serves that
        ledger.configs[str(path)] = {"network": name, "existed": path.exists(), "time": now}
    entry = ledger.run_dirs.get(str(run_dir))
    if entry is None or entry["existed"] or not run_dir.exists():
        ledger.run_dirs[str(run_dir)] = {"existed": run_dir.exists(), "time": now}
    ledger.save()


def clear_own_stale_dns(ledger: Ledger, own_networks: Path, run_dir: Path = RUN_DIR,
                        system_networks: Path | None = None) -> list[str]:
    """Remove each DNS config under ``run_dir`` that ``ledger`` names whose network neither our podman
    (``own_networks``) nor the machine's has now, when it appeared after the ledger's time (or was noted as
    serving a network of ours); forget the entries done with, save the ledger, and stop aardvark-dns when
    that left it nothing to serve; what was done.  Nothing the ledger does not name is touched."""
    folder = dns_dir(run_dir)
    done: list[str] = []
    removed = False
    for key, entry in sorted(ledger.configs.items()):
        path = Path(key)
        if path.parent != folder:
            continue  # another run folder's (a test's): not this call's
        name = entry["network"]
        if _has_network(name, (own_networks, system_networks or SYSTEM_NETWORKS)) is not None:
            continue  # its network is there: the config serves it (netavark removes it with the network)
        try:
            ctime = path.stat().st_ctime
        except FileNotFoundError:
            del ledger.configs[key]  # netavark's teardown removed it
            continue
        if not entry["existed"] and ctime < entry["time"] - CLOCK_SLACK_S:
            done.append(f"left {path}: it is older than our ledger's note that it was absent, so not ours")
            del ledger.configs[key]
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed = True
            done.append(f"removed {path}, the DNS config our network {name} left when it went without "
                        "netavark's teardown")
        del ledger.configs[key]
    ledger.save()
    stopped = stop_idle_aardvark(folder) if removed else None
    return [*done, *([stopped] if stopped else [])]


def _ip_json(*args: str) -> list[dict[str, Any]]:
    proc = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, timeout=30, check=False)
    try:
        return list(json.loads(proc.stdout or "[]"))
    except json.JSONDecodeError:
        return []


def remove_leaked_bridge(bridge: str) -> list[str]:
    """Take away ``bridge`` (a network of ours that is gone), the namespaces of the veths still on it, and
    with them the veths; what was done.  Why: nodes killed before netavark's teardown keep their network
    namespace, whose veth keeps the bridge (and its gateway address) alive."""
    if not bridge or not _ip_json("link", "show", "dev", bridge):
        return []
    ids = {ns.get("id"): ns["name"] for ns in _ip_json("netns", "list") if "id" in ns}
    done = []
    for veth in _ip_json("link", "show", "master", bridge):
        name = ids.get(veth.get("link_netnsid"))
        if name and subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30).returncode == 0:
            done.append(f"ip netns delete {name} (with {veth.get('ifname')} on {bridge})")
    deadline = time.monotonic() + 10  # the kernel frees a deleted namespace's veths a moment later
    while _ip_json("link", "show", "master", bridge) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not _ip_json("link", "show", "master", bridge) and subprocess.run(
            ["ip", "link", "delete", bridge], capture_output=True, timeout=30).returncode == 0:
        done.append(f"ip link delete {bridge}")
    return done


def stop_idle_aardvark(folder: Path) -> str | None:
    """SIGTERM the aardvark-dns serving ``folder`` when no network config is left in it to serve.  Called only
    after :func:`clear_own_stale_dns` removed our own config from it: the server served our network (and no
    other, or a config would be left); the pid file's process must be an aardvark-dns run on ``folder``."""
    if not folder.is_dir() or dns_configs(folder):
        return None
    try:
        pid = int((folder / PID_FILE).read_text().strip())
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
    except (OSError, ValueError, psutil.Error):
        return None
    if not any(Path(part).name == "aardvark-dns" for part in cmdline[:1]) or str(folder) not in cmdline:
        return None  # the pid now names another process
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(FileNotFoundError):
        (folder / PID_FILE).unlink()
    return f"stopped aardvark-dns {pid} (no network left to serve)"


def _aardvark_alive(folder: Path) -> int | None:
    try:
        pid = int((folder / PID_FILE).read_text().strip())
        return pid if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
    except (OSError, ValueError, psutil.Error):
        return None


def remove_run_dir(run_dir: Path, networks: Iterable[str]) -> tuple[str, bool]:
    """Take away ``run_dir``, which a run of ours made, path by path: the files our podman's netavark makes
    there (:data:`RUN_FILES`), then its folders (:data:`RUN_FOLDERS`) while empty; never a folder with its
    contents.  Left whole while a DNS config of one of ``networks`` (ours) or a live aardvark-dns is still in
    it, and when anything else is in it (another podman's state: ``ipam.db`` would hold its allocations too).

    Returns what was done, and whether the run folder is done with (removed, or someone else's now) rather
    than still in use by our network."""
    ours = dns_configs(dns_dir(run_dir))
    if any(p.name in set(networks) for p in ours):
        return f"left {run_dir}: our network's DNS config is still in it", False
    if (pid := _aardvark_alive(dns_dir(run_dir))) is not None:
        return f"left {run_dir}: aardvark-dns {pid} still runs from it", False
    known = {run_dir / rel for rel in (*RUN_FILES, *RUN_FOLDERS)}
    foreign = sorted(str(Path(top, name).relative_to(run_dir)) for top, dirs, files in os.walk(run_dir)
                     for name in (*dirs, *files) if Path(top, name) not in known or Path(top, name).is_symlink())
    if foreign:
        return (f"left {run_dir} as it is: {len(foreign)} path(s) in it are not what our podman's netavark makes "
                f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}): another podman uses it"), True
    removed = []
    for rel in RUN_FILES:
        with contextlib.suppress(FileNotFoundError):
            (run_dir / rel).unlink()
            removed.append(rel)
    left = []
    for rel in RUN_FOLDERS:
        try:
            (run_dir / rel).rmdir()
            removed.append(f"{rel}/" if rel else str(run_dir))
        except FileNotFoundError:
            pass
        except OSError as exc:  # something came in meanwhile: theirs
            left.append(f"{run_dir / rel} ({os.strerror(exc.errno or 0)})")
    if left:
        return f"removed {', '.join(removed) or 'nothing'} under {run_dir}; left {', '.join(left)}", True
    return f"removed {run_dir} ({', '.join(removed[:-1]) or 'empty'})", True


__all__ = ["LEDGER_NAME", "RUN_DIR", "RUN_FILES", "RUN_FOLDERS", "SYSTEM_NETWORKS", "ForeignDnsConfigError",
           "Ledger", "clear_own_stale_dns", "dns_configs", "dns_dir", "ledger_path", "note_before_create",
           "remove_leaked_bridge", "remove_run_dir", "stop_idle_aardvark"]
