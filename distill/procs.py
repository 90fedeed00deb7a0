"""Starting and stopping real teacher processes (bench and tests share this).

Teachers are real ``python -m distill.teacher`` subprocesses on 127.0.0.1; a teacher is
started with ``--port 0 --port-file`` so no port is ever guessed, and can be restarted on
the same port (the kill-and-restart row of the bench).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass
class TeacherProcess:
    """One teacher subprocess; ``url`` is known once :meth:`wait_ready` returned."""

    checkpoint: Path
    workdir: Path
    name: str
    cpus: str | None = None
    threads: int = 1
    port: int = 0
    host: str = "127.0.0.1"  # bind address (loopback: all test traffic stays on this machine)
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Launch (again, on the same port if it had one)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        port_file = self.workdir / f"{self.name}.port"
        port_file.unlink(missing_ok=True)
        self._log = (self.workdir / f"{self.name}.log").open("ab")
        cmd = [
            sys.executable, "-m", "distill.teacher",
            "--host", self.host, "--port", str(self.port), "--port-file", str(port_file),
            "--checkpoint", str(self.checkpoint), "--threads", str(self.threads),
            *self.extra_args,
        ]  # fmt: skip
        if self.cpus:
            cmd += ["--cpus", self.cpus]
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=affinity_preexec(self.cpus),
        )
        self.starts += 1

    def wait_ready(self, timeout_s: float = 60.0) -> float:
        """Block until /readyz answers 200; returns the wall time (time.time()) it did."""
        port_file = self.workdir / f"{self.name}.port"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"teacher {self.name} exited with {self.proc.returncode}; see {self._log_path()}")
            if port_file.exists():
                self.port = int(port_file.read_text().strip())
                with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return time.time()
            time.sleep(0.05)
        raise TimeoutError(f"teacher {self.name} not ready after {timeout_s}s; see {self._log_path()}")

    def _log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def kill(self) -> float:
        """SIGKILL, as a preempted machine would; returns when it happened."""
        t = time.time()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        return t

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (clean drain), SIGKILL if it does not exit in time; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.proc.returncode

    def metrics(self) -> dict[str, float]:
        """A few Prometheus samples (unlabelled series only) from /metrics, {} if unreachable."""
        out: dict[str, float] = {}
        try:
            with urllib.request.urlopen(self.url + "/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return out
        for line in text.splitlines():
            if line.startswith("#") or "{" in line:
                continue
            parts = line.split()
            if len(parts) == 2:
                with contextlib.suppress(ValueError):
                    out[parts[0]] = float(parts[1])
        return out


def affinity_preexec(cpus: str | None) -> Callable[[], None] | None:
    """Pin a child before it execs, so even its interpreter start and ``import torch``
    stay off the other process's core (pinning inside the child comes too late for that)."""
    if not cpus:
        return None
    from distill.pinning import parse_cpus

    wanted = parse_cpus(cpus) or set()

    def _pin() -> None:
        usable = wanted & os.sched_getaffinity(0)
        if usable:
            os.sched_setaffinity(0, usable)

    return _pin


def cpu_layout() -> tuple[str, str, str]:
    """(student cores, teacher cores, how) for this machine: student on the first core,
    teachers on all the others; with one core everything shares it (and we say so)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        c = str(cores[0])
        return c, c, f"only one core ({c}): student and teachers share it, the comparison is not fair"
    student = str(cores[0])
    teachers = ",".join(str(c) for c in cores[1:])
    return (
        student,
        teachers,
        (
            f"student pinned to core {student} (os.sched_setaffinity, torch.set_num_threads(1)); "
            f"every teacher process pinned to core(s) {teachers} with 1 torch thread; pure and same-net "
            f"runs use core {student} only"
        ),
    )
