"""Talk to the Locust master pod through its web API: workers, start, state, the stats files.

The master of ``deploy/hollowscale`` does not start by itself: the run starts the load (``POST
/swarm``: the locustfile's shape class follows the arrival curve) once the hollow nodes are Ready,
follows its state until the curve ends (``stopped``), and copies the same files a headless Locust
writes (``locust_stats.csv``, ``locust_failures.csv``, ``locust_stats_history.csv``, the HTML
report) into the run folder, where the report reads them as it does for the process placement.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

#: run-folder file <- master's web path (the names ``--csv PREFIX`` gives them)
FILES = {
    "locust_stats.csv": "/stats/requests/csv",
    "locust_failures.csv": "/stats/failures/csv",
    "locust_exceptions.csv": "/exceptions/csv",
    "locust_stats_history.csv": "/stats/requests_full_history/csv",
    "locust.html": "/stats/report?download=1",
}
#: seconds between two reads of the master's totals that must agree (worker report interval 3 s, web cache 2 s)
REPORT_SETTLE_S = 5.5


class LocustWebError(RuntimeError):
    """The master's web API did not answer as expected (URL, status, body)."""


@dataclass
class LocustMaster:
    """The master's web API at ``url`` (``http://127.0.0.1:PORT`` on the local real nodes)."""

    url: str
    http: requests.Session | None = None

    def __post_init__(self) -> None:
        if self.http is None:
            self.http = requests.Session()
            self.http.trust_env = False  # loopback: never through a proxy

    def _get(self, path: str, timeout: float = 10.0) -> requests.Response:
        assert self.http is not None
        r = self.http.get(self.url + path, timeout=timeout)
        if r.status_code != 200:
            raise LocustWebError(f"GET {self.url}{path}: HTTP {r.status_code} {r.text[:200]}")
        return r

    def stats(self) -> dict[str, Any]:
        """``/stats/requests``: ``state``, ``user_count``, ``workers``, ``worker_count``, stats rows."""
        doc: dict[str, Any] = self._get("/stats/requests").json()
        return doc

    def state(self) -> str:
        return str(self.stats().get("state", "unknown"))

    def worker_count(self) -> int:
        doc = self.stats()
        return int(doc.get("worker_count", len(doc.get("workers") or [])))

    def total_requests(self) -> int:
        """Requests and events the master counted so far (its ``Aggregated`` row)."""
        rows = self.stats().get("stats") or []
        return int(rows[-1].get("num_requests", 0)) if rows else 0

    def wait_final_stats(self, sleep: Callable[[float], None], timeout_s: float = 20.0) -> int:
        """After the curve ended: until the workers' last reports arrived (the total holds still over
        one report interval, 3 s in Locust, plus the web API's 2 s cache); the total."""
        deadline = time.monotonic() + timeout_s
        total = self.total_requests()
        while time.monotonic() < deadline:
            sleep(REPORT_SETTLE_S)
            now = self.total_requests()
            if now == total:
                return now
            total = now
        return total

    def start(self) -> str:
        """``POST /swarm``: the shape class takes over; its message."""
        assert self.http is not None
        r = self.http.post(self.url + "/swarm", data={}, timeout=15)
        if r.status_code != 200 or not r.json().get("success"):
            raise LocustWebError(f"POST {self.url}/swarm: HTTP {r.status_code} {r.text[:300]}")
        return str(r.json().get("message", ""))

    def stop(self) -> None:
        """``GET /stop`` (the curve ended early: an interrupted or failed run)."""
        with contextlib.suppress(requests.RequestException, LocustWebError):
            self._get("/stop")

    def save_files(self, folder: Path, only: tuple[str, ...] | None = None) -> list[str]:
        """Copy the stats files into ``folder``; the names written (a missing one is skipped)."""
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, path in FILES.items():
            if only is not None and name not in only:
                continue
            try:
                r = self._get(path, timeout=30)
            except (requests.RequestException, LocustWebError):
                continue
            tmp = folder / f".{name}.tmp"
            tmp.write_bytes(r.content)
            tmp.rename(folder / name)
            written.append(name)
        return written
