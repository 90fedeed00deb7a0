"""What podman's network backend (netavark) leaves in ``/run/containers``, and when it is stale.

Rootful podman keeps its network run state in ``/run/containers/networks`` whatever its configuration
says (podman 4.3 hard-codes the path for root): the IP allocations (``ipam.db``) and, per network with
DNS, the config of its DNS server, aardvark-dns (``aardvark-dns/<network>``: a first line with the
addresses it listens on, the network's gateways, then one line per container).  netavark rewrites that
file as containers come and go and removes it with the network's last container.

Why this module: a container that went without netavark's teardown (a killed engine, an interrupted
run) leaves its line, so the file outlives the network.  kind names its network ``kind`` every time;
the next ``kind`` network gets a new subnet, netavark appends the new containers to the old file, and
aardvark-dns goes on listening on the old gateway only: the nodes' DNS queries to the new gateway go
unanswered, they fall back to the machine's resolver, and a worker cannot resolve the control plane
(``kubeadm join``: ``lookup <cluster>-control-plane ... no such host``).  A DNS config of a network that
no podman on the machine has (neither ours, whose networks are in our private config folder, nor the
machine's rootful podman, ``/etc/containers/networks``) serves nobody: it is removed before a cluster is
made and after it is deleted, and an aardvark-dns left with no config at all is stopped.

The same interrupted teardown leaves the network's bridge, the nodes' veths on it and their network
namespaces (``/run/netns``): :func:`remove_leaked_bridge` takes them away, given the bridge of a network
of ours that is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

#: rootful podman's run state (made by it where missing)
RUN_DIR = Path("/run/containers")
PID_FILE = "aardvark.pid"
#: where the machine's own rootful podman keeps its networks (each ``<name>.json``)
SYSTEM_NETWORKS = Path("/etc/containers/networks")


def dns_configs(folder: Path) -> list[Path]:
    """The network configs aardvark-dns serves from ``folder`` (its pid file apart), [] without one."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != PID_FILE) if folder.is_dir() else []


def dns_dir(run_dir: Path = RUN_DIR) -> Path:
    """aardvark-dns's config folder under ``run_dir``."""
    return run_dir / "networks" / "aardvark-dns"


def stale_dns_configs(folder: Path, network_dirs: Iterable[Path]) -> list[Path]:
    """The network DNS configs in ``folder`` whose network is in none of ``network_dirs``."""
    dirs = list(network_dirs)
    return [p for p in dns_configs(folder) if not any((d / f"{p.name}.json").exists() for d in dirs)]


def clear_stale_dns(own_networks: Path, run_dir: Path = RUN_DIR, system_networks: Path | None = None) -> list[str]:
    """Remove the DNS configs of networks neither our podman (``own_networks``) nor the machine's has,
    then stop an aardvark-dns that has none left; what was done."""
    folder = dns_dir(run_dir)
    done = []
    for config in stale_dns_configs(folder, (own_networks, system_networks or SYSTEM_NETWORKS)):
        with contextlib.suppress(FileNotFoundError):
            config.unlink()
            done.append(f"removed the DNS config of network {config.name}, which no podman has ({config})")
    stopped = stop_idle_aardvark(folder)
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
    """SIGTERM the aardvark-dns of ``folder`` when no network config is left for it to serve."""
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


def remove_run_dir(run_dir: Path = RUN_DIR) -> str:
    """Remove ``run_dir`` (made during the run) once no DNS config is left in it; what was done."""
    if dns_configs(dns_dir(run_dir)):
        return f"left {run_dir}: a network's DNS config is still in it"
    shutil.rmtree(run_dir, ignore_errors=True)
    return f"removed {run_dir}" if not run_dir.exists() else f"left {run_dir}: could not remove it"


__all__ = ["RUN_DIR", "SYSTEM_NETWORKS", "clear_stale_dns", "dns_configs", "dns_dir", "remove_leaked_bridge",
           "remove_run_dir",
           "stale_dns_configs", "stop_idle_aardvark"]
