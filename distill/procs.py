"""Starting and stopping real teacher processes (bench and tests share this).

Teachers are real ``python -m distill.teacher`` subprocesses on 127.0.0.1; a teacher is
started with ``--port 0 --port-file`` so no port is ever guessed, and can be restarted on
the same port (the kill-and-restart row of the bench).

Processes go through the ground floor (:mod:`kubecore.procs`): each teacher runs in its own
session with its log appended to ``<workdir>/<name>.log``, and is stopped by its process group;
its ``/metrics`` are read with :mod:`kubecore.promtext` (``prometheus_client``'s parser).
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

from kubecore.procs import spawn, stop_group
from kubecore.promtext import scrape


@dataclass
class TeacherProcess:
    """One teacher subprocess; ``url`` is known once :meth:`wait_ready` returned.

    Attributes:
        checkpoint: the teacher's model checkpoint (``.pt``).
        workdir: folder of the port file ``<name>.port`` and the log ``<name>.log``.
        name: the teacher's name in file names and reports.
        cpus: cores to pin the process to before it execs (``"1"``, ``"1,3"``, ``"1-3"``; None: no pinning).
        threads: torch intra-op threads of the teacher.
        port: TCP port; 0 until the first start has bound one, then kept for restarts.
        host: bind address (loopback: all test traffic stays on this machine).
        extra_args: more ``python -m distill.teacher`` flags.
        proc: the running (or last) process.
        starts: how many times :meth:`start` launched it.
    """

    checkpoint: Path
    workdir: Path
    name: str
    cpus: str | None = None
    threads: int = 1
    port: int = 0
    host: str = "127.0.0.1"
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Launch in its own session (again, on the same port if it had one), pinned before exec."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        port_file = self.workdir / f"{self.name}.port"
        port_file.unlink(missing_ok=True)
        cmd = [
            sys.executable, "-m", "distill.teacher",
            "--host", self.host, "--port", str(self.port), "--port-file", str(port_file),
            "--checkpoint", str(self.checkpoint), "--threads", str(self.threads),
            *self.extra_args,
        ]  # fmt: skip
        if self.cpus:
            cmd += ["--cpus", self.cpus]
        self.proc = spawn(cmd, self._log_path(), preexec_fn=affinity_preexec(self.cpus))
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
        """SIGKILL to the whole process group, as a preempted machine would; returns when it happened."""
        t = time.time()
        if self.proc is not None:
            stop_group(self.proc, grace_s=10.0, sig=signal.SIGKILL)
        return t

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM to the process group (clean drain), SIGKILL after ``timeout_s`` seconds; returns the exit code."""
        if self.proc is None:
            return None
        return stop_group(self.proc, grace_s=timeout_s)

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics``, {} if unreachable.

        Keys as :func:`kubecore.promtext.sample_key` writes them: an unlabelled series by its sample
        name (``teacher_samples_total``, ``teacher_batch_size_count``, ``teacher_batch_size_sum``,
        ``teacher_queue_depth_samples``), a labelled one as ``name{label="value"}``.
        """
        return scrape(self.url + "/metrics", timeout_s=2.0)


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
