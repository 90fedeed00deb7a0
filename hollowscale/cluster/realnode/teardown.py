"""Take real nodes apart so that nothing of ours is left, and list what is (:func:`leftovers`).

Called by ``LocalCluster.down`` after the supervisor stopped every component (kubelets before their
containerd).  Pods outlive both: each container runs under its own ``containerd-shim-runc-v2``, which
stays when containerd exits.  So, per node:

1. if a shim of this node's containerd still runs (matched by its ``-address`` argument, our socket),
   start that containerd once more (same config: it reconnects to its shims) and kill and delete every
   task with ``ctr`` (runc then removes the container's cgroup, the shim its socket and the rootfs mount);
   then stop it;
2. kill any shim of ours that is left (and the processes it reaped), by pid and start time;
3. unmount everything under the cluster dir's ``real/``, deepest first (container rootfs overlays, sandbox
   ``/dev/shm``, the pod network namespaces under the state dir, the kubelet's root dir that it
   bind-mounts on itself, the tmpfs of projected volumes); a network namespace ends with its last
   mount and process, and its veth pair with it;
4. delete the bridge (and any veth still on it), remove ``/var/log/containers`` links into ``real/`` and
   libcni's cached results of our sandboxes (``/var/lib/cni/results``: a sandbox removed without CNI DEL
   leaves them), release the host claim (:mod:`hollowscale.cluster.realnode.host`).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

from hollowscale.cluster.realnode import host
from hollowscale.cluster.realnode.images import ctr_binary
from hollowscale.cluster.realnode.layout import NODE_PREFIX, NodeLayout, bridge_name, cni_network_name

MNT_DETACH = 2
LEGACY_LOG_DIR = Path("/var/log/containers")
CNI_CACHE = Path("/var/lib/cni/results")
SHIM_SOCKETS = Path("/run/containerd/s")


def node_layouts(cluster_dir: Path) -> list[NodeLayout]:
    """The real nodes that have a dir under ``<cluster>/real`` (whether they were recorded or not)."""
    real = Path(cluster_dir) / "real"
    if not real.is_dir():
        return []
    out = []
    for d in real.iterdir():
        suffix = d.name.removeprefix(NODE_PREFIX)
        if d.is_dir() and d.name.startswith(NODE_PREFIX) and suffix.isdigit():
            out.append(NodeLayout(Path(cluster_dir), int(suffix)))
    return sorted(out, key=lambda n: n.index)


# ------------------------------------------------------------------------------------------ processes
def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _start_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2:].split()[19])


def shims_of(socket: Path) -> list[int]:
    """Pids of containerd shims started by the containerd listening on ``socket``."""
    out = []
    for pid in _pids():
        argv = _cmdline(pid)
        if argv and "containerd-shim" in Path(argv[0]).name and str(socket) in argv:
            out.append(pid)
    return out


def _children(pid: int) -> list[int]:
    out = []
    for tid in _listdir(Path(f"/proc/{pid}/task")):
        with contextlib.suppress(OSError):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _kill(pids: list[int]) -> None:
    """SIGKILL each (pid, start time) we saw, so a reused pid is never hit."""
    seen = [(p, _start_ticks(p)) for p in pids]
    for pid, ticks in seen:
        if ticks is not None and _start_ticks(pid) == ticks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_start_ticks(p) == t for p, t in seen if t is not None):
        for pid, _t in seen:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)


def _ctr(layout: NodeLayout, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ctr_binary(), "--address", str(layout.containerd_socket), "--namespace", "k8s.io",
                           *args], capture_output=True, text=True, timeout=timeout)


def delete_tasks(layout: NodeLayout, containerd: str = "containerd") -> list[str]:
    """Start the node's containerd again, kill and delete every task (container) it has, stop it.

    Returns the ids of the tasks deleted.  Runs only when shims of the node are still alive.
    """
    if not shims_of(layout.containerd_socket) or not layout.containerd_config.exists():
        return []
    log = open(layout.base / "containerd-cleanup.log", "ab")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([containerd, f"--config={layout.containerd_config}"], stdout=log, stderr=log,
                            start_new_session=True)
    deleted: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _ctr(layout, "version", timeout=5).returncode != 0:
            if proc.poll() is not None:
                return deleted
            time.sleep(0.1)
        deleted = _ctr(layout, "tasks", "ls", "-q").stdout.split()
        for task in deleted:
            _ctr(layout, "tasks", "kill", "--signal", "SIGKILL", "--all", task)
        # each shim exits once its tasks are dead; containerd then cleans up after it ("cleaning up after
        # shim disconnected": rootfs unmounted, bundle and shim socket removed)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and shims_of(layout.containerd_socket):
            time.sleep(0.1)
        # that cleanup runs in containerd after the shim is gone: wait for it before stopping containerd
        while time.monotonic() < deadline:
            left = _ctr(layout, "tasks", "ls", "-q").stdout.split()
            if not left:
                break
            for task in left:
                _ctr(layout, "tasks", "delete", "--force", task, timeout=10)
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    return deleted


def kill_shims(layout: NodeLayout) -> list[int]:
    """SIGKILL what is left of the node's shims and the container processes they hold."""
    shims = shims_of(layout.containerd_socket)
    victims = list(shims)
    for shim in shims:
        victims += _children(shim)
    _kill(victims)
    return victims


# ------------------------------------------------------------------------------------------ mounts
def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(prefix: Path) -> list[str]:
    """Mount points at or below ``prefix`` in this mount namespace (deepest first)."""
    root = str(Path(prefix).absolute()).rstrip("/")
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = _unescape(line.split()[4])
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=lambda p: (p.count("/"), p), reverse=True)


def unmount_all(prefix: Path) -> list[str]:
    """Unmount everything under ``prefix`` (a few passes: bind mounts may stack; lazy as a last resort)."""
    libc = ctypes.CDLL(None, use_errno=True)
    done: list[str] = []
    for attempt in range(6):
        points = mounts_under(prefix)
        if not points:
            break
        for point in points:
            flags = MNT_DETACH if attempt >= 3 else 0
            if libc.umount2(point.encode(), flags) == 0:
                done.append(point)
    return done


def sandbox_ids(layouts: list[NodeLayout]) -> set[str]:
    """Ids of the pod sandboxes the nodes' CRI plugins still hold (their dirs go when a sandbox is removed)."""
    return {d for lay in layouts for d in _listdir(lay.cri_sandboxes)}


def task_ids(layout: NodeLayout) -> set[str]:
    """Ids of the containers (sandboxes too) that have a task bundle in the node's state dir."""
    return set(_listdir(layout.containerd_state / "io.containerd.runtime.v2.task" / "k8s.io"))


def shim_socket(layout: NodeLayout, task: str) -> Path:
    """Where containerd 1.6 puts the socket of the shim of ``task`` (``runtime/v2/shim.SocketAddress``):
    ``/run/containerd/s/<sha256 of <our socket>/<namespace>/<id>>``, whatever the state dir."""
    digest = hashlib.sha256(f"{layout.containerd_socket}/k8s.io/{task}".encode()).hexdigest()
    return SHIM_SOCKETS / digest


def remove_task_remains(layout: NodeLayout, tasks: set[str]) -> list[str]:
    """What a killed shim could not clean for ``tasks``: its socket and the containers' empty cgroups."""
    removed = []
    for task in sorted(tasks):
        sock = shim_socket(layout, task)
        if sock.exists():
            sock.unlink(missing_ok=True)
            removed.append(str(sock))
        for ctl in _listdir(host.CGROUP_ROOT):
            cgroup = host.CGROUP_ROOT / ctl / "k8s.io" / task
            if cgroup.is_dir():
                with contextlib.suppress(OSError):
                    cgroup.rmdir()  # only an empty cgroup can go; one with processes stays (and shows)
                    removed.append(str(cgroup))
    return removed


def cni_cache_entries(network: str, sandboxes: set[str]) -> list[Path]:
    """libcni's cached results of ours: ``<network>-<sandbox>-<ifname>`` and the loopback's of our sandboxes."""
    out = []
    for name in _listdir(CNI_CACHE):
        if name.startswith(f"{network}-") or any(f"-{sid}-" in name for sid in sandboxes):
            out.append(CNI_CACHE / name)
    return sorted(out)


# ------------------------------------------------------------------------------------------ all
def tear_down(cluster_dir: Path) -> list[str]:
    """Remove everything real nodes of ``cluster_dir`` left (after their processes were stopped).

    Returns one line per thing undone (for ``down``'s output and the tests' logs).
    """
    cluster_dir = Path(cluster_dir).absolute()
    done: list[str] = []
    layouts = node_layouts(cluster_dir)
    sandboxes = sandbox_ids(layouts)
    for layout in layouts:
        known = task_ids(layout) | sandbox_ids([layout])
        tasks = delete_tasks(layout)
        if tasks:
            done.append(f"{layout.name}: deleted {len(tasks)} containers")
        killed = kill_shims(layout)
        if killed:
            done.append(f"{layout.name}: killed {len(killed)} leftover shim/container processes")
        remains = remove_task_remains(layout, known)
        if remains:
            done.append(f"{layout.name}: removed {len(remains)} shim sockets and cgroups left by killed shims")
    unmounted = unmount_all(cluster_dir / "real")  # every mount of ours is there; none elsewhere is ours
    if unmounted:
        done.append(f"unmounted {len(unmounted)} mounts under {cluster_dir / 'real'}")
    bridge = bridge_name(cluster_dir)
    links = host.delete_bridge(bridge)
    if links:
        done.append(f"deleted links {', '.join(links)}")
    cached = cni_cache_entries(cni_network_name(bridge), sandboxes)
    for entry in cached:
        entry.unlink(missing_ok=True)
    if cached:
        done.append(f"removed {len(cached)} CNI cache entries from {CNI_CACHE}")
    for link in _listdir(LEGACY_LOG_DIR):
        path = LEGACY_LOG_DIR / link
        with contextlib.suppress(OSError):
            if path.is_symlink() and is_ours(os.readlink(path), cluster_dir):
                path.unlink()
    if layouts or host.claimants().get(str(cluster_dir)):
        done += host.release(cluster_dir)
    return done


def is_ours(target: str, cluster_dir: Path) -> bool:
    """Whether a link's ``target`` points into the real nodes' folder of ``cluster_dir`` (where our kubelets
    write pod logs); a link anywhere else, into the cluster dir's other entries included, is not ours."""
    return os.path.normpath(target).startswith(str(Path(cluster_dir).absolute() / "real") + "/")


def known_tasks(cluster_dir: Path) -> list[tuple[NodeLayout, str]]:
    """Every (node, container or sandbox id) of the cluster's real nodes now: take it before ``down`` and
    give it to :func:`leftovers`, which then also looks for their shim sockets and cgroups."""
    return [(lay, t) for lay in node_layouts(cluster_dir) for t in sorted(task_ids(lay) | sandbox_ids([lay]))]


def leftovers(cluster_dir: Path, tasks: list[tuple[NodeLayout, str]] | None = None) -> list[str]:
    """What of ``cluster_dir``'s real nodes is still there: processes (by command line or root dir),
    mounts, the bridge and its veths, legacy log links, libcni cache entries, the host claim, and for
    ``tasks`` (from :func:`known_tasks` before ``down``) their shim sockets and cgroups.  Empty after a
    clean ``down``.
    """
    cluster_dir = Path(cluster_dir).absolute()
    prefix = str(cluster_dir)
    found: list[str] = []
    me = os.getpid()
    for pid in _pids():
        if pid == me:
            continue
        argv = _cmdline(pid)
        root = ""
        with contextlib.suppress(OSError):
            root = os.readlink(f"/proc/{pid}/root")
        if any(f"{prefix}/" in a or a.endswith(prefix) for a in argv) or root.startswith(prefix + "/"):
            found.append(f"process {pid}: {' '.join(argv)[:160]} (root {root})")
    found += [f"mount {m}" for m in mounts_under(cluster_dir)]
    bridge = bridge_name(cluster_dir)
    if host.link_exists(bridge):
        found.append(f"link {bridge} (ports: {', '.join(host.bridge_ports(bridge)) or 'none'})")
    for link in _listdir(LEGACY_LOG_DIR):
        with contextlib.suppress(OSError):
            if os.readlink(LEGACY_LOG_DIR / link).startswith(prefix + "/"):
                found.append(f"log link {LEGACY_LOG_DIR / link}")
    found += [f"CNI cache entry {e}" for e in cni_cache_entries(cni_network_name(bridge), set())]
    if prefix in host.claimants():
        found.append(f"host claim of {prefix} in {host.CLAIM_FILE}")
    for layout, task in tasks or []:
        if shim_socket(layout, task).exists():
            found.append(f"shim socket {shim_socket(layout, task)} of {layout.name}/{task[:12]}")
        found += [f"cgroup {host.CGROUP_ROOT / ctl / 'k8s.io' / task}" for ctl in _listdir(host.CGROUP_ROOT)
                  if (host.CGROUP_ROOT / ctl / "k8s.io" / task).is_dir()]
    return found
