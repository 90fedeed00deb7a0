"""Run an agent as a child process and talk to its control server (for tests, benchmarks, runners).

The agent prints ``hollow: metrics on http://HOST:PORT/metrics ...`` on its first stdout line; this
helper reads the port from there, so callers can keep ``--metrics-port 0`` and never race for ports.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

_PORT_LINE = re.compile(rb"hollow: metrics on http://([0-9.]+):(\d+)/metrics")


@dataclass
class AgentProcess:
    """A running ``python -m hollow run`` child.

    Attributes:
        proc: the child process.
        host: control server address.
        port: control server port.
        log_path: where stderr (the agent's log) goes.
    """

    proc: subprocess.Popen[bytes]
    host: str
    port: int
    log_path: Path
    _log: IO[bytes] | None = field(default=None, repr=False)

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

    def metrics(self) -> dict[str, float]:
        """Current metric samples as ``name{labels}`` -> value (comments dropped)."""
        status, body = self.get("/metrics")
        out: dict[str, float] = {}
        if status != 200:
            return out
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                try:
                    out[key] = float(value)
                except ValueError:
                    continue
        return out

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

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait (graceful: ``--delete-nodes-on-exit`` runs); SIGKILL after ``timeout_s``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._log:
            self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the agent dies mid-work, as in a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._log:
            self._log.close()


def start_agent(kubeconfig: str | Path, pools: str | Path, log_path: str | Path, *args: str,
                python: str = sys.executable, timeout_s: float = 30.0,
                env: dict[str, str] | None = None) -> AgentProcess:
    """Start ``python -m hollow run --kubeconfig K --pools P [args...]`` and wait for its port line."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 - closed by stop()/kill()
    argv = [python, "-m", "hollow", "run", "--kubeconfig", str(kubeconfig), "--pools", str(pools), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            proc.wait(10)
            log.close()
            raise RuntimeError(f"agent exited with {proc.returncode} before serving; log: {log_path}")
        match = _PORT_LINE.search(line)
        if match:
            return AgentProcess(proc, match.group(1).decode(), int(match.group(2)), log_path, log)
    proc.kill()
    log.close()
    raise TimeoutError(f"agent did not print its port within {timeout_s}s; log: {log_path}")
