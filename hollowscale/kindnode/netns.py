"""The network namespaces of a kind cluster's node containers, recorded from podman before the cluster is
deleted and taken away after it when podman's own teardown left them.

Why: rootful podman 4.3 makes each started container's network namespace as ``/run/netns/netns-<random>``
and records the path in its state (``podman inspect``'s ``.NetworkSettings.SandboxKey``) once netavark has
set it up.  On ``podman rm`` it asks netavark to tear the network down and only then unmounts the
namespace; when that teardown fails (netavark has already removed the veth, then fails), podman logs the
error, forgets the path and leaves the namespace: empty, with no veth on the bridge, so
:func:`hollowscale.kindnode.netavark.remove_leaked_bridge` cannot find it.  So the harness records each
node container's namespace path while the container still exists (:class:`Recorder`), and after the
delete removes exactly those that are still there, whose container is gone and that hold no process
(:func:`plan_removal` decides, :func:`remove_recorded` does it).  Never a namespace by its name's pattern,
never one not recorded.

What podman cannot give: a ``podman run`` killed after it made the namespace and before it saved it to its
state (during netavark's setup) leaves a namespace podman never recorded; nothing here can name it.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

#: where rootful podman (containers/common's netns package) mounts container network namespaces; ``ip netns``'s
#: folder too, so a name here is what ``ip netns delete`` takes
NETNS_DIR = Path("/run/netns")
#: ``podman container inspect --format``: one line per container, its name and its namespace path ("" when
#: it has none: created and never started, or stopped, which tears the network down)
INSPECT_FORMAT = "{{.Name}}\t{{.NetworkSettings.SandboxKey}}"


def parse_inspect(output: str) -> dict[str, str]:
    """``INSPECT_FORMAT`` lines -> {container: namespace path}; containers without a namespace left out."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        name, _, path = line.strip().partition("\t")
        if name and path.strip():
            found[name] = path.strip()
    return found


@dataclass
class Recorder:
    """The namespace paths podman gave for a cluster's node containers, path -> container, kept once seen.

    ``inspect(names)`` runs ``podman container inspect --format INSPECT_FORMAT <names>`` and returns its
    stdout (podman prints the containers that exist and fails for the others, which is fine here).
    """

    inspect: Callable[[Sequence[str]], str]
    containers: Sequence[str]
    recorded: dict[str, str] = field(default_factory=dict)

    def record(self) -> None:
        """Inspect the containers now and add what they give.  A container already gone when inspected
        (kind removed it, or it was never made) gives nothing: there is nothing of it to record."""
        if not self.containers:
            return
        for container, path in parse_inspect(self.inspect(list(self.containers))).items():
            self.recorded.setdefault(path, container)

    @contextlib.contextmanager
    def watching(self, interval_s: float = 1.0) -> Iterator[None]:
        """Record every ``interval_s`` while the body runs (kind creating the cluster, and on an interrupt the
        delete of what it made, which happens inside that call), and once more at the end."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                with contextlib.suppress(Exception):  # a failed inspect records nothing this round
                    self.record()
                stop.wait(interval_s)

        thread = threading.Thread(target=loop, name="netns-recorder", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


@dataclass(frozen=True)
class Plan:
    """What :func:`plan_removal` decided: the namespace names to delete and a line for every recorded path."""

    delete: list[str]
    lines: list[str]


def plan_removal(recorded: Mapping[str, str], present: Collection[str], alive: Collection[str],
                 pids: Mapping[str, Sequence[int] | None], netns_dir: Path = NETNS_DIR) -> Plan:
    """Which recorded namespaces to delete, a pure decision.

    Args:
        recorded: namespace path -> the container podman gave it for (:class:`Recorder`).
        present: names in ``netns_dir`` now (of the recorded ones).
        alive: the recorded containers that still exist (their namespace is still podman's).
        pids: name -> the processes inside it (``ip netns pids``), None when that could not be read.

    A path is deleted only when it is directly in ``netns_dir``, still there, its container is gone, and it
    holds no process; every other recorded path gets a line saying why it stays.
    """
    delete: list[str] = []
    lines: list[str] = []
    for path, container in sorted(recorded.items()):
        p = Path(path)
        if p.parent != netns_dir or p.name in ("", ".", ".."):
            lines.append(f"left {path} (of {container}): not a namespace in {netns_dir}")
        elif p.name not in present:
            continue  # podman's teardown removed it: nothing to say
        elif container in alive:
            lines.append(f"left {path}: its container {container} still exists")
        elif (inside := pids.get(p.name)) is None:
            lines.append(f"left {path} (of {container}): its processes cannot be read (ip netns pids failed)")
        elif inside:
            lines.append(f"left {path} (of {container}): processes {', '.join(map(str, inside))} are in it")
        else:
            delete.append(p.name)
    return Plan(delete, lines)


class NetnsOps(Protocol):
    """The process calls :func:`remove_recorded` makes (injected: the unit tests start no process)."""

    def exists(self, name: str) -> bool: ...
    def container_exists(self, container: str) -> bool: ...
    def pids(self, name: str) -> list[int] | None: ...
    def delete(self, name: str) -> str | None:
        """``ip netns delete name``; None when it worked, else why not."""
        ...


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)


@dataclass(frozen=True)
class SystemOps:
    """:class:`NetnsOps` on this machine: ``ip netns`` and our podman (``container_exists``)."""

    container_exists_fn: Callable[[str], bool]
    netns_dir: Path = NETNS_DIR

    def exists(self, name: str) -> bool:
        return (self.netns_dir / name).exists()

    def container_exists(self, container: str) -> bool:
        return self.container_exists_fn(container)

    def pids(self, name: str) -> list[int] | None:
        proc = _ip("netns", "pids", name)
        if proc.returncode != 0:
            return None
        try:
            return [int(x) for x in proc.stdout.split()]
        except ValueError:
            return None

    def delete(self, name: str) -> str | None:
        proc = _ip("netns", "delete", name)
        return None if proc.returncode == 0 else (proc.stderr.strip() or f"exit {proc.returncode}")


def remove_recorded(recorded: Mapping[str, str], ops: NetnsOps, netns_dir: Path = NETNS_DIR) -> list[str]:
    """After the cluster's delete: ``ip netns delete`` each recorded namespace :func:`plan_removal` picks;
    what was done and what was left, one line each."""
    if not recorded:
        return []
    names = {Path(p).name for p in recorded if Path(p).parent == netns_dir}
    present = {n for n in names if ops.exists(n)}
    alive = {c for p, c in recorded.items() if Path(p).name in present and ops.container_exists(c)}
    pids = {n: ops.pids(n) for n in present}
    plan = plan_removal(recorded, present, alive, pids, netns_dir)
    done = list(plan.lines)
    by_name = {Path(p).name: c for p, c in recorded.items()}
    for name in plan.delete:
        why = ops.delete(name)
        done.append(f"ip netns delete {name} (of {by_name[name]}, left empty after its teardown)" if why is None
                    else f"left {netns_dir / name} (of {by_name[name]}): ip netns delete failed: {why}")
    return done


__all__ = ["INSPECT_FORMAT", "NETNS_DIR", "NetnsOps", "Plan", "Recorder", "SystemOps", "parse_inspect",
           "plan_removal", "remove_recorded"]
