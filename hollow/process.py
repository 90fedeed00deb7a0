"""Run an agent as a child process and talk to its control server (for tests, benchmarks, runners).

The child is started through :func:`kubecore.procs.spawn` (its own session, stderr appended to a log,
stdout a pipe); it binds its control port itself (``--metrics-port 0``, the default here) and prints
``hollow: metrics on http://HOST:PORT/metrics ...`` as its first stdout line, which
:func:`kubecore.procs.read_announced` reads, so no port is ever guessed and raced for.

Stopping is graceful first: SIGTERM to the agent alone (so ``--delete-nodes-on-exit`` deletes its
Nodes and Leases), a wait, then SIGKILL of its whole process group, which also removes anything the
agent may have left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubecore.procs import ProcessRecord, read_announced, record, spawn, stop_group
from kubecore.promtext import scrape

_PORT_LINE = re.compile(rb"hollow: metrics on http://([0-9.]+):(\d+)/metrics")


@dataclass
class AgentProcess:
    """A running ``python -m hollow run`` child.

    Attributes:
        proc: the child process (leader of its own process group).
        host: control server address.
        port: control server port (announced by the agent).
        log_path: where stderr (the agent's log) goes.
        record: the child's (pid, start time) identity, for signalling it safely later.
    """

    proc: subprocess.Popen[bytes]
    host: str
    port: int
    log_path: Path
    record: ProcessRecord | None = None
    terminated: bool = False

    @property
    def pid(self) -> int:
        """The agent's process id."""
        return self.proc.pid

    @property
    def url(self) -> str:
        """Base URL of the control server."""
        return f"http://{self.host}:{self.port}"

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        """GET on the control server; (status, body), status 0 when unreachable."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError):
            return 0, b""

    def post(self, path: str, body: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """POST JSON to the control server and return the JSON answer (raises on HTTP errors)."""
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def metrics(self, timeout_s: float = 5.0) -> dict[str, float]:
        """Current samples as ``name{label="v",...}`` (labels sorted) -> value; {} when unreachable."""
        return scrape(self.url + "/metrics", timeout_s)

    def wait_healthy(self, timeout_s: float) -> None:
        """Block until ``/healthz`` answers 200 (all nodes registered)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}; log: {self.log_path}")
            if self.get("/healthz")[0] == 200:
                return
            time.sleep(0.2)
        raise TimeoutError(f"agent not healthy after {timeout_s}s; log: {self.log_path}")

    def terminate(self) -> None:
        """SIGTERM the agent alone, once (a second SIGTERM makes it exit at once, skipping the cleanup).

        Call it on every agent first and :meth:`stop` each afterwards, so they clean up in parallel.
        """
        if not self.terminated and self.proc.poll() is None:
            self.terminated = True
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM the agent (unless :meth:`terminate` did) and wait, graceful: ``--delete-nodes-on-exit``
        runs; then SIGKILL its process group (the agent too, if still running after ``timeout_s``).

        Returns:
            The agent's exit code (negative: the signal that killed it).
        """
        if self.proc.poll() is None:
            self.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        stop_group(self.proc, grace_s=0.0, sig=signal.SIGKILL)
        self._close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the group: the agent dies mid-work, as in a crash."""
        stop_group(self.proc, grace_s=0.0, sig=signal.SIGKILL)
        self._close()

    def _close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_agent(kubeconfig: str | Path, pools: str | Path, log_path: str | Path, *args: str,
                python: str = sys.executable, timeout_s: float = 30.0, env: dict[str, str] | None = None,
                cwd: str | Path | None = None) -> AgentProcess:
    """Start ``python -m hollow run --kubeconfig K --pools P [args...]`` and wait for its port line.

    Args:
        kubeconfig: the cluster's kubeconfig (one file).
        pools: the pools file (``stages`` paths in it are relative to its folder).
        log_path: the agent's log (appended; folders created).
        args: more ``hollow run`` options (``--shard 0/2``, ``--delete-nodes-on-exit``, ...); without a
            ``--metrics-port``, port 0 is passed, so an inherited ``HOLLOW_METRICS_PORT`` cannot race.
        python: the interpreter.
        timeout_s: seconds to wait for the port line.
        env: variables added to this process's environment.
        cwd: the child's working directory (relative ``kubeconfig``/``pools`` are resolved first).

    Raises:
        RuntimeError: the agent exited before announcing its port (its log is named).
        TimeoutError: no port line within ``timeout_s`` (the agent is killed).
    """
    log_path = Path(log_path)
    extra = [] if any(a == "--metrics-port" or a.startswith("--metrics-port=") for a in args) \
        else ["--metrics-port", "0"]
    argv = [python, "-m", "hollow", "run", "--kubeconfig", os.path.abspath(kubeconfig),
            "--pools", os.path.abspath(pools), *extra, *args]
    proc = spawn(argv, log_path, cwd=Path(cwd) if cwd is not None else None, env=env, stdout_pipe=True)
    try:
        match = read_announced(proc, _PORT_LINE, timeout_s, "hollow agent", log_path)
    except (RuntimeError, TimeoutError):
        stop_group(proc, grace_s=0.0, sig=signal.SIGKILL)
        if proc.stdout is not None:
            proc.stdout.close()
        raise
    return AgentProcess(proc, match.group(1).decode(), int(match.group(2)), log_path, record("hollow-agent", proc))
