"""Child processes of a run (agents, Prometheus, Locust): own sessions, logs, a pid registry, clean stop.

Every child runs in its own session/process group, so Ctrl-C in the terminal reaches only the
orchestrator, which then stops each child by its process group (SIGTERM, grace, SIGKILL).  The
registry (``pids.json`` in the run folder) lists what was started so a test can check nothing is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Child:
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
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # leftovers of the group (e.g. locust --processes workers) go too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode


class Children:
    def __init__(self, registry: Path):
        self.registry = registry
        self.children: list[Child] = []
        self.extra: dict[str, int] = {}

    def start(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> Child:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True)
        child = Child(name, argv, log, proc)
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
        self.registry.write_text(json.dumps(doc, indent=2))

    def stop_all(self, grace_s: float = 10.0) -> dict[str, int | None]:
        codes = {}
        for c in reversed(self.children):
            codes[c.name] = c.stop(grace_s)
        return codes
