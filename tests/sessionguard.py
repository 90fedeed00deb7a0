"""The suite leaves nothing of ours running, and ``make unit`` starts nothing.

Two guards, both wired into ``conftest.py``:

* **Leftover processes.** The session puts a marker of its own in the environment
  (:data:`MARKER_VAR`) before any test runs. Every process the suite starts inherits it: test
  subprocesses, ``kubecore.procs.spawn`` (which merges ``os.environ``), the cluster supervisor and
  the components it starts, containerd and its shims, kubelets, agents, Locust, Prometheus,
  Chromium. So a process that still carries this session's marker when the run ends was started by
  the suite and outlived its test: a teardown that did not happen (a test killed by its timeout, a
  ``finally`` that was never reached). :func:`leftovers` finds them by the marker, never by name, so
  nothing another user or session started on the machine is touched; the session ends failed, naming
  each one, after :func:`stop` ends them (SIGTERM to its process group, then SIGKILL).
* **Unit tests start no process.** A test without the ``integration`` marker runs with process
  creation refused (:func:`refuse_processes`): ``subprocess`` (and so ``asyncio`` subprocesses),
  ``os.fork``, ``os.posix_spawn`` and ``os.system`` raise :class:`ProcessStartRefused` naming the
  test and what to do. The marker is then honest by construction: ``make unit`` starts nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil

MARKER_VAR = "HOLLOWSCALE_TEST_SESSION"


def mark_session() -> str:
    """Put this session's marker in the environment (once; pytest-xdist workers inherit the controller's)."""
    return os.environ.setdefault(MARKER_VAR, uuid.uuid4().hex)


@dataclass(frozen=True)
class Leftover:
    """A process of this session still running after its tests ended."""

    pid: int
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.cmdline[:200]}"


def _marked(proc: psutil.Process, session: str) -> bool:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return proc.environ().get(MARKER_VAR) == session
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return False


def leftovers(session: str, exclude: set[int] | None = None) -> list[Leftover]:
    """Running processes whose environment carries ``session``'s marker, except ``exclude`` (pids)."""
    skip = set(exclude or ()) | {os.getpid()}
    found = []
    for proc in psutil.process_iter():
        if proc.pid in skip or not _marked(proc, session):
            continue
        try:
            found.append(Leftover(proc.pid, " ".join(proc.cmdline()) or proc.name()))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def settle(session: str, exclude: set[int] | None = None, grace_s: float = 5.0) -> list[Leftover]:
    """:func:`leftovers` once processes still on their way out (a teardown's last SIGTERM) have had
    ``grace_s`` to go: waits for the event (the list emptying), not for a fixed time."""
    deadline = time.monotonic() + grace_s
    while True:
        found = leftovers(session, exclude)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def stop(found: list[Leftover], grace_s: float = 5.0) -> None:
    """End each leftover and its process group: SIGTERM, then SIGKILL after ``grace_s``."""
    procs = []
    for left in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            pgid = os.getpgid(left.pid)
            if pgid != os.getpgid(0):  # never our own group
                os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(left.pid)
            proc.terminate()
            procs.append(proc)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace_s)


#: fixtures that start processes (the session's cluster): a test using one is an integration test
PROCESS_FIXTURES = frozenset({"cluster", "real_cluster", "kubectl"})


def unmarked_integration(items: list[Any]) -> str | None:
    """One line naming the selected tests that use a cluster fixture without the integration marker."""
    bad = [item.nodeid for item in items if item.get_closest_marker("integration") is None
           and PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))]
    if not bad:
        return None
    return (f"{len(bad)} tests use the session cluster but are not marked integration "
            f"(`make unit` must start nothing): {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}")


def fail_on_leftovers(session: Any) -> list[Leftover]:
    """At the end of a pytest session (the controller's, not an xdist worker's): end this session's
    processes that are still running, name each on the terminal and mark the session failed."""
    if hasattr(session.config, "workerinput") or MARKER_VAR not in os.environ:
        return []
    left = settle(os.environ[MARKER_VAR])
    if not left:
        return []
    stop(left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(left)} process(es) started by this test session were still running at its end "
             "(a teardown that did not happen); ended now:", *(f"  {p}" for p in left)]
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line)
    session.exitstatus = 1  # pytest.ExitCode.TESTS_FAILED
    return left


class ProcessStartRefused(RuntimeError):
    """A test without the ``integration`` marker tried to start a process."""


@contextlib.contextmanager
def refuse_processes(test: str) -> Iterator[None]:
    """Within the block, every way of starting a process raises :class:`ProcessStartRefused`."""
    why = (f"{test} started a process, but it is not marked integration: `make unit` starts nothing. "
           "Mark it `pytest.mark.integration` (or test the logic without a process).")

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise ProcessStartRefused(why)

    saved: list[tuple[Any, str, Any]] = []
    targets: list[tuple[Any, str]] = [(subprocess.Popen, "_execute_child"), (os, "fork"), (os, "forkpty"),
                                      (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system")]
    targets += [(os, name) for name in dir(os) if name.startswith(("execv", "spawnv", "spawnl", "execl"))]
    for owner, name in targets:
        if hasattr(owner, name):
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, refuse)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
