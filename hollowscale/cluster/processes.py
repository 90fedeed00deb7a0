"""Start, identify and stop the component processes of a local cluster, by pid only.

A pid alone can be reused by the kernel after a process dies, so every pid we record is paired with
its start time from ``/proc/<pid>/stat``: we only ever signal a process whose (pid, start time)
matches what we recorded.  Nothing here looks processes up by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
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


def spawn(name: str, argv: list[str], log_path: Path, cwd: Path) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Start ``argv`` in its own session (Ctrl-C in the terminal does not reach it; we stop it)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)
    stat = _read_stat(proc.pid)
    return proc, ProcessRecord(name=name, pid=proc.pid, start_ticks=stat[1] if stat else -1)


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
