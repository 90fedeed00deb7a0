"""Child processes, written once: start in their own session with a log, identify by pid and start
time, stop a whole process group with a grace period, find free ports.

Every child runs in its own session (process group), so Ctrl-C in the terminal reaches only the
program that started it, which then stops each child by its group (SIGTERM, grace, SIGKILL) and
leaves nothing behind.  The control plane, Prometheus, hollow agents, Locust and distillation
teachers are all started through :func:`spawn`.

A pid alone can be reused by the kernel after a process dies, so every pid we record is paired with
its start time from ``/proc/<pid>/stat``: we only ever signal a process whose (pid, start time)
matches what we recorded.  Nothing here looks processes up by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRecord:
    """A process we started: pid plus kernel start time (clock ticks since boot)."""

    name: str
    pid: int
    start_ticks: int

    def alive(self) -> bool:
        """True while this very process (not a pid reuse) is running and not a zombie."""
        stat = _read_stat(self.pid)
        return stat is not None and stat[1] == self.start_ticks and stat[0] != "Z"


def _read_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start ticks) of a pid, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The comm field may contain spaces and parentheses; fields after the last ')' are fixed.
    rest = raw[raw.rindex(")") + 2:].split()
    return rest[0], int(rest[19])


def spawn(argv: list[str], log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None,
          stdout_pipe: bool = False, preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stderr (and stdout unless ``stdout_pipe``) appended to ``log_path``.

    Args:
        argv: the command.
        log_path: log file (parent folders are created).
        cwd: working directory.
        env: variables added to this process's environment.
        stdout_pipe: keep stdout as a pipe (a child that announces its port on its first line).
        preexec_fn: run in the child before exec (CPU pinning).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(argv, stdout=subprocess.PIPE if stdout_pipe else log,
                                stderr=log if stdout_pipe else subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, env={**os.environ, **(env or {})}, start_new_session=True,
                                preexec_fn=preexec_fn)


def record(name: str, proc: subprocess.Popen[bytes]) -> ProcessRecord:
    """The (pid, start time) identity of a child we just started."""
    stat = _read_stat(proc.pid)
    return ProcessRecord(name=name, pid=proc.pid, start_ticks=stat[1] if stat else -1)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
    """Signal the child's process group, wait ``grace_s``, then SIGKILL the group; returns the exit code.

    Leftovers of the group (e.g. ``locust --processes`` workers) are killed even when the leader
    exited by itself.
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode


def read_announced(proc: subprocess.Popen[bytes], pattern: re.Pattern[bytes], timeout_s: float,
                   what: str, log_path: Path) -> re.Match[bytes]:
    """Read the child's stdout lines until one matches ``pattern`` (e.g. the port it bound).

    A child that binds port 0 and announces the port never races another program for it.

    Raises:
        RuntimeError: the child exited first (naming its exit code and log).
        TimeoutError: no such line within ``timeout_s`` (the child is killed).
    """
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # wait for output without blocking past the deadline (a silent child must not hang us)
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, min(1.0, deadline - time.monotonic())))
        if not ready:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready; log: {log_path}")
            continue
        line = proc.stdout.readline()
        if not line:
            proc.wait(10)
            raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready; log: {log_path}")
        match = pattern.search(line)
        if match:
            return match
    stop_group(proc, grace_s=2)
    raise TimeoutError(f"{what} did not announce itself within {timeout_s:g}s; log: {log_path}")


def stop(record: ProcessRecord, grace_s: float = 10.0) -> bool:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL. Returns True if it was running."""
    if not record.alive():
        _reap(record.pid)
        return False
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not record.alive():
            return True
        time.sleep(0.05)
    if record.alive():
        try:
            os.kill(record.pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        for _ in range(100):
            _reap(record.pid)
            if not record.alive():
                break
            time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago (bound together, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something already listens on (host, port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


_ERROR_HINT = re.compile(r"(^E\d{4}|error|Error|failed|Failed|fatal|panic|already in use)")


def failure_reason(log_path: Path, max_len: int = 300) -> str:
    """One line from a component's log that best says why it stopped."""
    try:
        lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return "no log written"
    if not lines:
        return "no output"
    for line in reversed(lines[-200:]):
        if _ERROR_HINT.search(line):
            return line[:max_len]
    return lines[-1][:max_len]
