"""Child processes of a run (agents, Prometheus, Locust): own sessions, logs, a pid registry, clean stop.

Processes start through :func:`kubecore.procs.spawn` (own session, so Ctrl-C in the terminal reaches
only the orchestrator, which then stops each child by its process group).  The registry
(``pids.json`` in the run folder) lists what was started so a test can check nothing is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubecore.procs import spawn, stop_group


@dataclass
class Child:
    """One child process of the run."""

    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.time)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal the child's process group, wait ``grace_s``, then SIGKILL the group."""
        return stop_group(self.proc, grace_s, sig)


class Children:
    """The run's children, recorded in a registry file as they start."""

    def __init__(self, registry: Path):
        self.registry = registry
        self.children: list[Child] = []
        self.extra: dict[str, int] = {}

    def start(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> Child:
        """Start ``argv`` (output to ``log``) and record it."""
        return self.adopt(name, argv, log, spawn(argv, log, cwd=cwd, env=env))

    def adopt(self, name: str, argv: list[str], log: Path, proc: subprocess.Popen[bytes]) -> Child:
        """Record a child started by an engine's own helper (e.g. a hollow agent)."""
        child = Child(name, list(argv), log, proc)
        self.children.append(child)
        self._save()
        return child

    def note(self, name: str, pid: int | None) -> None:
        """Record a process started by something else for this run (e.g. Prometheus, the cluster)."""
        if pid:
            self.extra[name] = pid
            self._save()

    def _save(self) -> None:
        doc = {"children": [{"name": c.name, "pid": c.pid, "argv": c.argv} for c in self.children],
               "other": self.extra}
        tmp = self.registry.with_suffix(".tmp")  # readers never see a half-written registry
        tmp.write_text(json.dumps(doc, indent=2))
        os.replace(tmp, self.registry)

    def stop_all(self, grace_s: float = 10.0) -> dict[str, int | None]:
        """Stop every child, newest first."""
        codes = {}
        for c in reversed(self.children):
            codes[c.name] = c.stop(grace_s)
        return codes
