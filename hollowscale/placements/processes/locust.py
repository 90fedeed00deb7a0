"""Locust as a headless process beside the harness: the arrival curve from the run's load spec, its
statistics written as CSV into the run folder every second, stopped with SIGINT (its final stats)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from hollowscale.paths import REPO_ROOT
from hollowscale.placements.children import Child, Children

LOCUSTFILE = REPO_ROOT / "loadgen" / "locustfile.py"


class LocustProcess:
    """One headless Locust (``--processes N`` forks N workers of it) for one run."""

    def __init__(self, children: Children, kubeconfig: Path, load_spec: Path, run_id: str, folder: Path,
                 log: Path, processes: int = 1) -> None:
        self.children = children
        self.log = log
        self.argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--kubeconfig",
                     str(kubeconfig), "--load-spec", str(load_spec), "--run-id", run_id, "--csv",
                     str(folder / "locust"), "--csv-full-history", "--html", str(folder / "locust.html"),
                     "--only-summary", "--loglevel", "WARNING", "--stop-timeout", "5", "--no-create-namespace"]
        if processes > 1:
            self.argv += ["--processes", str(processes)]
        self.child: Child | None = None

    def start(self) -> float:
        started = time.time()
        self.child = self.children.start("locust", self.argv, self.log, cwd=REPO_ROOT)
        return started

    def poll(self) -> bool:
        return self.child is None or not self.child.alive()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(grace_s=10, sig=signal.SIGINT)

    def finish(self, elapsed_s: float, duration_s: float) -> str | None:
        assert self.child is not None
        code = self.child.proc.returncode
        if code not in (0, 1) or elapsed_s < duration_s - 5:
            return f"locust exited with {code} after {elapsed_s:.0f}s of {duration_s:g}s (log: {self.child.log})"
        return None

    def pids(self) -> dict[str, int]:
        return {"locust": self.child.pid} if self.child is not None and self.child.alive() else {}
